"""Where requests enter the server, as a hostile web page or a careless client meets it: a
cross-site POST (text/plain, form, multipart: no preflight) is refused before any route
runs, on every API; a body nested 100,000 levels deep is a quick 400 on every route; a
Host whose port part is not a port is not ours; and every error is written in the shape of
the API called and names that API's fields. Real HTTP against a real uvicorn server."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402

MSGS = [{"role": "user", "content": "the value of the item"}]
EVIL = "http://evil.example"
BODIES = {  # a request each route would answer
    "/v1/chat/completions": {"messages": MSGS, "max_tokens": 2},
    "/v1/completions": {"prompt": "the value", "max_tokens": 2},
    "/v1/messages": {"messages": MSGS, "max_tokens": 2},
    "/v1/messages/count_tokens": {"messages": MSGS},
    "/v1/responses": {"input": "the value", "max_output_tokens": 2},
    "/api/chat": {"messages": MSGS, "stream": False, "options": {"num_predict": 2}},
    "/api/generate": {"prompt": "the value", "stream": False, "options": {"num_predict": 2}},
    "/api/show": {"model": "tiny"},
    "/api/embed": {"input": "the value"},
    "/v1/embeddings": {"input": "the value"},
    "/infill": {"input_prefix": "def f(", "input_suffix": ")", "n_predict": 2},
    "/tokenize": {"content": "the value"},
}
DEEP_ROUTES = ["/v1/messages", "/api/chat", "/v1/responses", "/api/generate", "/api/show", "/api/embed",
               "/v1/messages/count_tokens", "/v1/chat/completions", "/v1/embeddings", "/infill", "/tokenize"]


@pytest.fixture(scope="module")
def server(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    app = create_app(ServedModel(eng, "tiny"), ServerConfig(list_catalog=False, max_body=1024 * 1024))
    srv = ServerThread(app).start()
    jobs: list[str] = []
    eng.queue.add_listener(lambda job, ev: jobs.append(job.source) if ev.kind == "done" else None)
    yield SimpleNamespace(eng=eng, url=srv.url, port=srv.port, jobs=jobs)
    srv.stop()
    eng.close()


def message_of(path: str, r: httpx.Response) -> str:
    """The error message, checking the body has the shape of the API `path` belongs to."""
    body = r.json()
    if path.startswith("/v1/messages"):
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        return body["error"]["message"]
    if path.startswith("/api/"):
        assert set(body) == {"error"} and isinstance(body["error"], str), body
        return body["error"]
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]["message"]


def post(server, path: str, content: bytes | str, **headers: str) -> httpx.Response:
    return httpx.post(server.url + path, content=content, headers=headers, timeout=60)


# -- cross-site requests -------------------------------------------------------------------------
SIMPLE_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]


@pytest.mark.parametrize("content_type", SIMPLE_TYPES)
@pytest.mark.parametrize("path", list(BODIES))
def test_a_cross_site_post_is_refused_before_its_route_runs(server, path, content_type):
    import json

    before = len(server.jobs)
    t0 = time.monotonic()
    r = post(server, path, json.dumps({"model": "tiny", **BODIES[path]}), **{"Content-Type": content_type,
                                                                               "Origin": EVIL})
    assert r.status_code == 403, r.text
    assert time.monotonic() - t0 < 5
    line = message_of(path, r)
    assert "\n" not in line and EVIL in line and f"--cors-origin {EVIL}" in line, line
    assert len(server.jobs) == before  # nothing generated, counted or embedded


def test_a_foreign_delete_a_null_origin_and_a_cross_site_fetch_are_refused(server):
    r = httpx.delete(server.url + "/v1/responses/resp_x", headers={"Origin": EVIL}, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
    body = '{"messages": [{"role": "user", "content": "hi"}], "stream": false}'
    null = post(server, "/api/chat", body, **{"Content-Type": "text/plain", "Origin": "null"})
    assert null.status_code == 403 and "'null'" in null.json()["error"] and "--cors-origin '*'" in null.json()["error"]
    site = post(server, "/api/chat", body, **{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"})
    assert site.status_code == 403 and "Sec-Fetch-Site: cross-site" in site.json()["error"]
    other_port = post(server, "/api/chat", body, Origin=f"http://127.0.0.1:{server.port + 1}")
    assert other_port.status_code == 403  # another local app is another origin


def test_requests_without_an_origin_from_the_servers_own_origin_and_reads_are_answered(server):
    body = '{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": false, ' \
           '"options": {"num_predict": 2}}'
    assert post(server, "/api/chat", body).status_code == 200  # curl -d: a form type, no Origin
    own = post(server, "/api/chat", body, Origin=f"http://127.0.0.1:{server.port}")
    assert own.status_code == 200, own.text
    assert post(server, "/api/chat", body, **{"Sec-Fetch-Site": "same-origin"}).status_code == 200
    assert httpx.get(server.url + "/api/tags", headers={"Origin": EVIL}, timeout=30).status_code == 200


def test_an_allowed_origin_and_its_preflight_still_work(tiny_target):
    from fastapi.testclient import TestClient
    from engine.serving.server import ServedModel, ServerConfig, create_app

    eng = Engine(tiny_target, n_ctx=256, metrics_log=False)
    body = '{"model": "t", "messages": [{"role": "user", "content": "hi"}], "stream": false, ' \
           '"options": {"num_predict": 2}}'
    try:
        app = create_app(ServedModel(eng, "t"), ServerConfig(cors_origins=("http://localhost:3000",),
                                                             list_catalog=False))
        with TestClient(app) as tc:
            for origin in ("http://localhost:3000", "http://127.0.0.1:3000"):  # a loopback origin's twin too
                pre = tc.options("/api/chat", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
                assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == origin
                r = tc.post("/api/chat", content=body, headers={"Origin": origin, "Content-Type": "text/plain"})
                assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin, r.text
            refused = tc.post("/api/chat", content=body, headers={"Origin": "http://localhost:3001"})
            assert refused.status_code == 403 and "--cors-origin http://localhost:3001" in refused.json()["error"]
        anyone = create_app(ServedModel(eng, "t"), ServerConfig(cors_origins=("*",), api_key="k", list_catalog=False))
        with TestClient(anyone) as tc:
            r = tc.post("/api/chat", content=body, headers={"Origin": EVIL, "Authorization": "Bearer k"})
            assert r.status_code == 200, r.text
    finally:
        eng.close()


def test_own_origin_rules():
    from engine.serving.server.doors.origins import is_own_origin

    assert is_own_origin("http://127.0.0.1:8080", "127.0.0.1:8080", "http")
    assert is_own_origin("http://[::1]:8080", "[0:0:0:0:0:0:0:1]:8080", "http")
    assert is_own_origin("https://models.lan", "models.lan", "http")  # behind a TLS proxy: both default ports
    assert is_own_origin("http://models.lan:80", "models.lan", "http")
    assert not is_own_origin("http://127.0.0.1:3000", "127.0.0.1:8080", "http")
    assert not is_own_origin("http://localhost:8080", "127.0.0.1:8080", "http")
    assert not is_own_origin("http://models.lan:3000", "models.lan", "http")
    assert not is_own_origin("null", "127.0.0.1:8080", "http")
    assert not is_own_origin("http://127.0.0.1:8080", "127.0.0.1:8080@evil.example", "http")
    assert not is_own_origin("http://127.0.0.1:x", "127.0.0.1:8080", "http")
    assert not is_own_origin("http://127.0.0.1:8080", None, "http")


# -- deeply nested JSON --------------------------------------------------------------------------
@pytest.mark.parametrize("path", DEEP_ROUTES)
@pytest.mark.parametrize("shape", ["array", "object"])
def test_json_nested_100000_levels_is_a_quick_400_on_every_route(server, path, shape):
    n = 100_000
    deep = "[" * n + "]" * n if shape == "array" else '{"a":' * n + "1" + "}" * n
    t0 = time.monotonic()
    r = post(server, path, deep, **{"Content-Type": "application/json"})
    took = time.monotonic() - t0
    assert r.status_code == 400, r.text[:300]
    line = message_of(path, r)
    assert "\n" not in line and "128 levels deep" in line, line
    assert took < 5, took


def test_the_depth_limit_counts_brackets_outside_strings_only(server):
    from engine.serving.server.doors.json_body import MAX_DEPTH, depth

    assert depth(b'{"a": "[[[[", "b": [["\\"]]", "\\\\"]]}') == 3
    assert depth(b"[1, {}, [[]]]") == 3 and depth(b'"[["') == 0 and depth(b"{}") == 1
    assert depth('[["["]]'.encode("utf-16")) == 2
    deepest = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    r = post(server, "/api/show", f'{{"model": "tiny", "x": {deepest}, "y": "{"[" * 1000}"}}')
    assert r.status_code == 200, r.text  # MAX_DEPTH levels in all, and brackets in a string do not count
    r = post(server, "/api/show", f'{{"model": "tiny", "x": [{deepest}]}}')
    assert r.status_code == 400 and "128 levels" in r.json()["error"]


# -- each API's own errors -------------------------------------------------------------------------
BAD_SCHEMA = {"type": "integer", "minimum": 5, "maximum": 1}


@pytest.mark.parametrize("path, body, names", [
    ("/api/chat", {"messages": MSGS, "stream": False, "format": BAD_SCHEMA}, "format: "),
    ("/api/generate", {"prompt": "x", "stream": False, "format": BAD_SCHEMA}, "format: "),
    ("/api/chat", {"messages": MSGS, "stream": False, "options": {"temperature": 5}}, "options.temperature: "),
    ("/v1/messages", {"messages": MSGS, "max_tokens": 4, "output_config": {"format": {
        "type": "json_schema", "schema": BAD_SCHEMA}}}, "output_config.format.schema: "),
    ("/v1/messages", {"messages": MSGS, "max_tokens": 4, "tools": [{"name": "f", "input_schema": {"type": "string"}}]},
     "tools[0].input_schema: "),
    ("/v1/messages", {"messages": MSGS, "max_tokens": 4, "tools": [{"name": "f" * 65, "input_schema": {}}]},
     "tools[0].name: "),
    ("/v1/messages", {"messages": MSGS, "max_tokens": 4, "tool_choice": {"type": "any"},
                      "tools": [{"name": "f", "input_schema": {}}],
                      "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
     "tool_choice: "),
    ("/v1/responses", {"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": BAD_SCHEMA}}},
     "text.format.schema: "),
])
def test_errors_name_the_fields_of_the_api_called(server, path, body, names):
    r = httpx.post(server.url + path, json={"model": "tiny", **body}, timeout=60)
    assert r.status_code == 400, r.text
    line = message_of(path, r)
    assert line.startswith(names), line
    for other in ("response_format", "json_schema", "function", "parameters") if path != "/v1/responses" else ():
        assert other not in line, line
    if path == "/v1/responses":
        assert r.json()["error"]["param"] == names[:-2] and "response_format" not in line


def test_a_text_block_without_text_says_so(server):
    for content in ([{"type": "text"}], [{"type": "text", "text": 5}]):
        r = httpx.post(server.url + "/v1/messages", json={"messages": [{"role": "user", "content": content}],
                                                          "max_tokens": 4}, timeout=60)
        line = message_of("/v1/messages", r)
        assert r.status_code == 400 and "messages[0].content[0].text: a text block needs a 'text' string" in line
        assert "not supported" not in line
    r = httpx.post(server.url + "/v1/messages", json={"messages": MSGS, "max_tokens": 4, "system": [{"type": "text"}]},
                   timeout=60)
    assert r.status_code == 400 and "system[0].text: a text block needs" in message_of("/v1/messages", r)
    r = httpx.post(server.url + "/v1/responses", json={"input": [{"role": "user", "content": [{"type": "input_text"}]}]},
                   timeout=60)
    assert r.status_code == 400 and "input[0].content[0].text: a input_text part needs a 'text' string" in \
        r.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/v1/messages", "/api/chat", "/v1/responses", "/v1/chat/completions"])
def test_refusals_before_the_route_have_the_shape_of_the_api_called(server, path):
    big = {"messages": MSGS, "max_tokens": 4, "pad": "x" * 1_100_000}
    too_large = httpx.post(server.url + path, json=big, timeout=60)
    assert too_large.status_code == 413 and "--max-body" in message_of(path, too_large)
    host = httpx.post(server.url + path, json=BODIES.get(path, {}), headers={"Host": "evil.example"}, timeout=60)
    assert host.status_code == 403 and "--allow-host evil.example" in message_of(path, host)
    unknown = httpx.post(server.url + path + "/nothing/here", json={}, timeout=60)
    assert unknown.status_code in (404, 405) and message_of(path, unknown)
    if path.startswith("/v1/messages"):
        assert too_large.json()["error"]["type"] == "request_too_large"
        assert host.json()["error"]["type"] == "permission_error"


# -- Host names ------------------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["127.0.0.1:{port}@evil.example", "localhost:{port}@evil.example",
                                  "[::1]:{port}@evil.example", "127.0.0.1:{port}x", "[::1]x"])
def test_a_host_whose_port_is_not_a_port_is_refused(server, host):
    r = httpx.get(server.url + "/v1/models", headers={"Host": host.format(port=server.port)}, timeout=30)
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "host_not_allowed" and "not a host name" in r.json()["error"]["message"]


def test_host_port_reads_name_and_port_or_nothing():
    from engine.serving.server.doors.hosts import host_name, host_port

    assert host_port("127.0.0.1:8080") == ("127.0.0.1", 8080) and host_port("[::1]") == ("::1", None)
    assert host_port("Example.COM.") == ("example.com", None) and host_port("localhost:") == ("localhost", None)
    for bad in ("127.0.0.1:8080@evil.com", "[::1]:80@evil", "[::1]x", "[::1", "a:²"):
        assert host_port(bad) is None, bad
    assert host_name("127.0.0.1:8080@evil.com") == "127.0.0.1:8080@evil.com"
