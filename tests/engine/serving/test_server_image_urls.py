"""`tandem serve --fetch-image-urls`: pictures named by http(s) URL fetched in a worker thread
within bounds (bytes, time, redirects, format) and answered as the same picture sent inline, on
the OpenAI, Anthropic and Responses forms; each failure a 400 in one line naming the URL."""

from __future__ import annotations

import base64
import http.server
import threading
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from api_servers import KEY, api_server  # noqa: E402
from engine.documents.images import ImageError  # noqa: E402
from engine.serving.server.doors.image_urls import fetch_image, inline_image_urls  # noqa: E402
from image_files import png_bytes  # noqa: E402

AUTH = {"Authorization": f"Bearer {KEY}"}
PICTURE = png_bytes(32, 32, seed=4)
URI = "data:image/png;base64," + base64.b64encode(PICTURE).decode()


class _Pictures(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path
        if path == "/cat.png":
            self._send(200, PICTURE, "image/png")
        elif path == "/redirect":
            self._redirect("/cat.png")
        elif path == "/to-file":
            self._redirect("file:///etc/passwd")
        elif path == "/loop":
            self._redirect("/loop")
        elif path == "/text":
            self._send(200, b"hello, not a picture", "text/plain")
        elif path == "/huge":  # declares more than it may
            self.send_response(200)
            self.send_header("Content-Length", str(200 * 1024 * 1024))
            self.end_headers()
        elif path == "/endless":  # no length: counted while read
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(200):
                    self.wfile.write(b"\x89PNG\r\n\x1a\n" + b"\0" * 65536)
            except OSError:
                pass
        elif path == "/slow":
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(40):
                    self.wfile.write(b"\x89PNG")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
        else:
            self._send(404, b"no", "text/plain")

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, to: str) -> None:
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(scope="module")
def host():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pictures)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_picture_is_fetched_within_its_bounds(host):
    assert fetch_image(host + "/cat.png") == PICTURE
    assert fetch_image(host + "/redirect") == PICTURE

    def refused(path: str, **kw) -> str:
        with pytest.raises(ImageError) as e:
            fetch_image(host + path, **kw)
        assert "\n" not in str(e.value) and str(e.value).startswith(host + path)
        return str(e.value)[len(host + path) + 2:]

    assert refused("/missing") == "the host answered HTTP 404"
    assert refused("/text") == "not a PNG, JPEG or WebP picture"
    assert refused("/huge") == "209.7 MB; images are limited to 21 MB"
    assert refused("/endless", max_bytes=1_000_000) == "more than 1 MB; images are limited to that"
    assert refused("/to-file").startswith("redirected to file:///etc/passwd, which is not http(s)")
    assert refused("/loop") == "more than 3 redirects"
    started = time.monotonic()
    assert refused("/slow", seconds=1.0) == "not fetched within 1 s"
    assert time.monotonic() - started < 3.0


def test_only_the_picture_fields_of_a_body_are_fetched_and_at_most_sixteen():
    seen: list[str] = []

    def fetch(url: str) -> bytes:
        seen.append(url)
        return PICTURE

    body = (b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "see http://a.example/x.png"},'
            b'{"type": "image_url", "image_url": {"url": "http://a.example/1.png"}},'
            b'{"type": "image_url", "image_url": "https://a.example/2.png"},'
            b'{"type": "image_url", "image_url": {"url": "' + URI.encode() + b'"}},'
            b'{"type": "input_image", "image_url": "http://a.example/3.png"},'
            b'{"type": "image", "source": {"type": "url", "url": "http://a.example/4.png"}}]}]}')
    import json

    out = json.loads(inline_image_urls(body, fetch))
    parts = out["messages"][0]["content"]
    assert seen == ["http://a.example/1.png", "https://a.example/2.png", "http://a.example/3.png",
                    "http://a.example/4.png"]
    assert parts[0]["text"] == "see http://a.example/x.png"  # text is text
    assert parts[1]["image_url"]["url"] == URI and parts[2]["image_url"] == URI and parts[3]["image_url"]["url"] == URI
    assert parts[4]["image_url"] == URI
    assert parts[5]["source"] == {"type": "base64", "media_type": "image/png",
                                  "data": base64.b64encode(PICTURE).decode()}
    assert inline_image_urls(b'{"model": "x", "prompt": "http://a.example"}', fetch) is None
    assert inline_image_urls(b"not json http", fetch) is None  # the route says what is wrong
    many = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"http://a.example/{i}.png"}} for i in range(17)]}]}
    with pytest.raises(ImageError, match="17 image URLs in one request; at most 16"):
        inline_image_urls(json.dumps(many).encode(), fetch)


@pytest.fixture(scope="module")
def fetching(tiny_vision):
    target, projector = tiny_vision
    with api_server(target, "mtp", mmproj=projector, n_ctx=512, config={"fetch_image_urls": True}) as s:
        yield s


def _openai(s, url: str) -> httpx.Response:
    return httpx.post(s.url + "/v1/chat/completions", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "max_tokens": 12, "temperature": 0, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"}, {"type": "image_url", "image_url": {"url": url}}]}]})


def test_a_server_that_fetches_answers_a_url_as_the_same_picture_inline(fetching, host):
    inline = _openai(fetching, URI)
    fetched = _openai(fetching, host + "/cat.png")
    assert fetched.status_code == 200, fetched.text
    assert fetched.json()["choices"][0]["message"]["content"] == inline.json()["choices"][0]["message"]["content"]
    usage = fetched.json()["usage"]
    assert usage["prompt_tokens"] == inline.json()["usage"]["prompt_tokens"]
    assert usage["prompt_tokens_details"]["cached_tokens"] >= usage["prompt_tokens"] - 1  # the same picture, read before

    def anthropic(source: dict) -> httpx.Response:
        return httpx.post(fetching.url + "/v1/messages", headers=AUTH, timeout=60, json={
            "model": "tiny-pair", "max_tokens": 12, "temperature": 0, "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is in this picture?"}, {"type": "image", "source": source}]}]})

    by_url = anthropic({"type": "url", "url": host + "/cat.png"})
    by_data = anthropic({"type": "base64", "media_type": "image/png", "data": base64.b64encode(PICTURE).decode()})
    assert by_url.status_code == 200, by_url.text
    assert by_url.json()["content"] == by_data.json()["content"]

    responses = httpx.post(fetching.url + "/v1/responses", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "max_output_tokens": 12, "temperature": 0, "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {"type": "input_image", "image_url": host + "/cat.png"}]}]})
    assert responses.status_code == 200, responses.text

    missing = _openai(fetching, host + "/missing.png")
    assert missing.status_code == 400
    err = missing.json()["error"]
    assert err["code"] == "invalid_image_url" and err["message"] == f"{host}/missing.png: the host answered HTTP 404"
    gone = anthropic({"type": "url", "url": host + "/text"})
    assert gone.status_code == 400 and gone.json()["type"] == "error"
    assert gone.json()["error"]["message"].endswith("/text: not a PNG, JPEG or WebP picture")
