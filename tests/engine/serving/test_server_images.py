"""Pictures on `tandem serve --mmproj`: OpenAI `image_url` parts (data: URIs) answered with the
text the engine writes for the same picture, with every draft the server offers; an http URL,
bad base64, another format, and a server that cannot see, each a 400 in one line."""

from __future__ import annotations

import base64

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from api_servers import KEY, api_server  # noqa: E402
from image_files import png_bytes  # noqa: E402

AUTH = {"Authorization": f"Bearer {KEY}"}
PICTURE = png_bytes(32, 32, seed=4)
URI = "data:image/png;base64," + base64.b64encode(PICTURE).decode()


B64 = base64.b64encode(PICTURE).decode()
Q = "What is in this picture?"


def _message(url: str = URI, text: str = "What is in this picture?") -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": text},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


@pytest.fixture(scope="module")
def seeing(tiny_vision):
    target, projector = tiny_vision
    with api_server(target, "mtp", mmproj=projector, n_ctx=512) as s:
        yield s


def chat(s, messages, **kw) -> httpx.Response:
    body = {"model": "tiny-pair", "messages": messages, "max_tokens": 24, "temperature": 0, **kw}
    return httpx.post(s.url + "/v1/chat/completions", json=body, headers=AUTH, timeout=60)


def test_an_image_url_is_answered_as_the_engine_answers_it(seeing):
    r = chat(seeing, _message())
    assert r.status_code == 200, r.text
    out = r.json()
    text = out["choices"][0]["message"]["content"]
    plain = chat(seeing, [{"role": "user", "content": "What is in this picture?"}]).json()
    assert out["usage"]["prompt_tokens"] >= plain["usage"]["prompt_tokens"] + 16  # the picture's tokens
    from engine.documents.images import MEDIA_MARKER

    alone = seeing.eng.generate([{"role": "user", "content": "What is in this picture?" + MEDIA_MARKER}], chat=True,
                                images=[PICTURE], max_tokens=24)
    assert text == alone.text  # the marker stands where the part stood, after the text
    for draft in ("none", "lookup", "mtp"):
        again = chat(seeing, _message(), draft=draft, lookahead=3).json()
        assert again["choices"][0]["message"]["content"] == text, draft


@pytest.mark.parametrize("url,fragment", [
    ("https://example.com/cat.png", "image URLs are not fetched by this server"),
    ("data:image/png;base64,@@@", "not valid base64"),
    ("data:image/bmp;base64," + base64.b64encode(png_bytes(8, 8, fmt="BMP")).decode(), "is a BMP file; send PNG, JPEG or WebP"),
    ("data:text/plain,hello", "must be a data:image/...;base64"),
])
def test_a_picture_the_server_cannot_take_is_a_400_in_one_line(seeing, url, fragment):
    r = chat(seeing, _message(url))
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "messages[0].content" and err["message"].startswith("messages[0].content: part 1 (image_url): ")
    assert fragment in err["message"] and "\n" not in err["message"]


def test_a_server_without_a_projector_says_so(tiny_hybrid):
    with api_server(tiny_hybrid, None, n_ctx=256) as s:
        r = chat(s, _message())
        anthropic = httpx.post(s.url + "/v1/messages", headers=AUTH, timeout=60, json={
            "model": "tiny-pair", "max_tokens": 8, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}]}]})
        ollama = httpx.post(s.url + "/api/chat", headers=AUTH, timeout=60, json={
            "model": "tiny-pair", "stream": False, "messages": [{"role": "user", "content": Q, "images": [B64]}]})
    assert anthropic.status_code == 400 and anthropic.json()["type"] == "error"
    assert "reads text only" in anthropic.json()["error"]["message"]
    assert ollama.status_code == 400 and "reads text only" in ollama.json()["error"]
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "images_not_supported"
    assert err["message"] == (f"{tiny_hybrid.name} reads text only: start the server with its vision projector "
                              "(--mmproj FILE, or an mmproj-*.gguf beside it) to send images")



def _openai_text(s, parts: list[dict]) -> str:
    r = chat(s, [{"role": "user", "content": parts}])
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def test_every_api_takes_the_picture_in_its_own_form(seeing):
    image = {"type": "image_url", "image_url": {"url": URI}}
    # Anthropic: blocks joined by a newline, the picture where its block stands
    r = httpx.post(seeing.url + "/v1/messages", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "max_tokens": 24, "temperature": 0, "messages": [{"role": "user", "content": [
            {"type": "text", "text": Q}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}]}]})
    assert r.status_code == 200, r.text
    assert r.json()["content"][0]["text"] == _openai_text(seeing, [{"type": "text", "text": Q + "\n"}, image])
    # Ollama: `images` beside the message's text, before it
    r = httpx.post(seeing.url + "/api/chat", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "stream": False, "options": {"temperature": 0, "num_predict": 24},
        "messages": [{"role": "user", "content": Q, "images": [B64]}]})
    assert r.status_code == 200, r.text
    before = _openai_text(seeing, [image, {"type": "text", "text": Q}])
    assert r.json()["message"]["content"] == before
    r = httpx.post(seeing.url + "/api/generate", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "stream": False, "prompt": Q, "images": [B64],
        "options": {"temperature": 0, "num_predict": 24}})
    assert r.status_code == 200 and r.json()["response"] == before
    # Responses: input_image parts
    r = httpx.post(seeing.url + "/v1/responses", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "max_output_tokens": 24, "temperature": 0, "input": [{"role": "user", "content": [
            {"type": "input_text", "text": Q}, {"type": "input_image", "image_url": URI}]}]})
    assert r.status_code == 200, r.text
    assert r.json()["output"][0]["content"][0]["text"] == _openai_text(seeing, [{"type": "text", "text": Q}, image])


def test_a_bad_picture_is_refused_in_each_apis_shape(seeing):
    bmp = base64.b64encode(png_bytes(8, 8, fmt="BMP")).decode()
    r = httpx.post(seeing.url + "/v1/messages", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": bmp}}]}]})
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert r.json()["error"]["message"].startswith("messages[0].content[0].source: ")
    assert "a BMP file; send PNG, JPEG or WebP" in r.json()["error"]["message"]
    r = httpx.post(seeing.url + "/api/chat", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "stream": False, "messages": [{"role": "user", "content": Q, "images": ["@@"]}]})
    assert r.status_code == 400 and r.json()["error"].startswith("messages[0].images[0]: ")
    r = httpx.post(seeing.url + "/v1/responses", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": "https://example.com/a.png"}]}]})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("input[0].content[0].image_url: image URLs are not fetched")


def test_count_tokens_counts_the_pictures_image_tokens(seeing):
    messages = [{"role": "user", "content": [
        {"type": "text", "text": Q}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}]}]
    n = httpx.post(seeing.url + "/v1/messages/count_tokens", headers=AUTH, timeout=60,
                   json={"model": "tiny-pair", "messages": messages}).json()["input_tokens"]
    answer = httpx.post(seeing.url + "/v1/messages", headers=AUTH, timeout=60,
                        json={"model": "tiny-pair", "max_tokens": 4, "messages": messages}).json()
    plain = httpx.post(seeing.url + "/v1/messages/count_tokens", headers=AUTH, timeout=60,
                       json={"model": "tiny-pair", "messages": [{"role": "user", "content": Q}]}).json()["input_tokens"]
    usage = answer["usage"]  # input_tokens: those read now; the rest came from the context kept
    assert n == usage["input_tokens"] + usage.get("cache_read_input_tokens", 0) and n >= plain + 16
