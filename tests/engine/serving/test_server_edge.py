"""The server's edge, as a hostile or careless user meets it: flags checked before anything
loads (the same check for every command), Host names checked against DNS rebinding, '*'
CORS only with a key, error bodies that name models by id and never by path, an empty
body and a tool whose parameters are not an object answered with one clear line.
Real HTTP against a real uvicorn server on 127.0.0.1, and the CLI in-process."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.cli.main import main as cli  # noqa: E402

MSGS = [{"role": "user", "content": "the value of the item"}]


def one_line(err: str, *says: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("tandem: error: "), lines[0]
    for s in says:
        assert s in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def server(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    app = create_app(ServedModel(eng, "tiny"), ServerConfig(list_catalog=False, allowed_hosts=("models.lan",)))
    srv = ServerThread(app).start()
    yield SimpleNamespace(eng=eng, app=app, url=srv.url, port=srv.port, target=Path(tiny_target))
    srv.stop()
    eng.close()


# -- runtime flags: one check, every command, before anything loads ---------------------------
@pytest.mark.parametrize("argv, says", [
    (["serve", "--threads", "100000"], "--threads"),
    (["serve", "--temperature", "-1"], "temperature"),
    (["serve", "--ctx", "5"], "--ctx"),
    (["bench", "--threads", "100000"], "--threads"),
    (["race", "hello", "--threads", "100000"], "--threads"),
    (["optimize-draft", "--draft", "MISSING", "--threads", "100000"], "--threads"),
])
def test_every_command_checks_its_runtime_flags_before_looking_for_models(capsys, tmp_path, argv, says):
    missing = str(tmp_path / "missing.gguf")
    argv = [missing if a == "MISSING" else a for a in argv] + ["--target", missing]
    assert cli(argv) == 2
    one_line(capsys.readouterr().err, says)


def test_worker_checks_threads_before_it_binds(capsys):
    assert cli(["worker", "--port", "0", "--threads", "100000"]) == 2
    one_line(capsys.readouterr().err, "--threads", "512")


# -- serve's own options ----------------------------------------------------------------------
@pytest.mark.parametrize("extra, says", [
    (["--max-body", "0"], "--max-body"),
    (["--api-key", "clé-secrète"], "--api-key", ),
    (["--api-key", "two words"], "--api-key"),
    (["--cors-origin", "*"], "--cors-origin '*'"),
    (["--allow-host", "http://evil.example/"], "--allow-host"),
])
def test_serve_refuses_bad_options_in_one_line_before_loading(capsys, tmp_path, extra, says):
    assert cli(["serve", "--target", str(tmp_path / "missing.gguf"), *extra]) == 2
    line = one_line(capsys.readouterr().err, says)
    assert "missing.gguf" not in line  # refused before the model was looked for


def test_star_cors_on_loopback_names_both_ways_out_and_each_works(capsys, tmp_path):
    missing = str(tmp_path / "missing.gguf")
    assert cli(["serve", "--target", missing, "--cors-origin", "*"]) == 2
    one_line(capsys.readouterr().err, "--api-key", "--allow-any-origin-without-key", "any web page")
    for extra in (["--api-key", "k"], ["--allow-any-origin-without-key"]):
        assert cli(["serve", "--target", missing, "--cors-origin", "*", *extra]) == 2
        line = one_line(capsys.readouterr().err)  # past the CORS check: the missing target (or a busy port)
        assert "--cors-origin" not in line


def test_a_non_ascii_key_from_the_environment_is_refused_too(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TANDEM_API_KEY", "schlüssel")
    assert cli(["serve", "--target", str(tmp_path / "missing.gguf")]) == 2
    one_line(capsys.readouterr().err, "TANDEM_API_KEY", "ASCII")


# -- Host names: DNS rebinding ------------------------------------------------------------------
def test_a_rebinding_host_is_refused_with_the_flag_that_allows_it(server):
    for path, body in (("/v1/models", None), ("/v1/chat/completions", {"messages": MSGS, "max_tokens": 4})):
        h = {"Host": f"evil.example:{server.port}"}
        r = httpx.post(server.url + path, json=body, headers=h, timeout=60) if body else \
            httpx.get(server.url + path, headers=h, timeout=60)
        assert r.status_code == 403, r.text
        err = r.json()["error"]
        assert err["message"] == "Host 'evil.example' is not allowed; add --allow-host evil.example"
        assert err["code"] == "host_not_allowed"
    metrics = httpx.get(server.url + "/metrics", timeout=30).text
    assert 'tandem_requests_total{code="403",endpoint="rejected"} 2.0' in metrics


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "127.0.0.1", "127.0.0.1:{port}", "localhost:{port}",
                                  "models.lan", "Models.LAN:{port}"])
def test_loopback_names_the_bound_address_and_allowed_names_are_answered(server, host):
    r = httpx.get(server.url + "/v1/models", headers={"Host": host.format(port=server.port)}, timeout=30)
    assert r.status_code == 200, r.text


def test_host_rules():
    from engine.serving.server.doors.hosts import allows, host_name, normalise

    assert host_name("[::1]:8080") == "::1" and host_name("Example.COM.:80") == "example.com"
    assert normalise("[0:0:0:0:0:0:0:1]") == "::1"
    assert allows("::1", "127.0.0.1", ()) and allows("127.0.0.2", "127.0.0.1", ())
    assert allows("192.168.1.5", "192.168.1.5", ())  # bound to 0.0.0.0: the interface the client used
    assert not allows("192.168.1.6", "192.168.1.5", ())
    assert not allows("evil.example", "127.0.0.1", ("good.example",))
    assert allows("evil.example", "127.0.0.1", ("*",))


def test_serve_allows_the_machines_names_only_on_a_network_address(monkeypatch):
    from engine.cli import serve
    from engine.serving.server.doors import hosts

    monkeypatch.setattr(hosts, "machine_names", lambda: ["box", "box.local"])

    def names(host: str, *allow: str) -> tuple[str, ...]:
        return serve.allowed_hosts(argparse.Namespace(host=host, allow_host=list(allow) or None))

    assert names("127.0.0.1") == ()
    assert names("127.0.0.1", "my.lan") == ("my.lan",)
    assert names("0.0.0.0") == ("box", "box.local")
    assert names("myserver.lan") == ("myserver.lan", "box", "box.local")


# -- error bodies: model ids, never paths -------------------------------------------------------
def test_an_embedding_context_that_cannot_be_made_is_a_5xx_naming_the_model_not_its_path(server, monkeypatch):
    import llama_cpp

    from engine.llamacpp import embedding

    monkeypatch.setattr(embedding.llama_cpp, "llama_init_from_model", lambda model, params: None)
    assert embedding.llama_cpp is llama_cpp
    r = httpx.post(server.url + "/v1/embeddings", json={"input": "the value"}, timeout=60)
    assert r.status_code == 500, r.text
    err = r.json()["error"]
    assert err["type"] == "server_error"
    assert "tiny" in err["message"] and "embedding context" in err["message"]
    assert str(server.target.parent) not in r.text and str(Path.home()) not in r.text


def test_a_bug_quoting_a_file_is_answered_without_the_folder(server, monkeypatch):
    from engine.serving.server.apis.openai import Completions

    async def broken(self, *a, **k):
        raise RuntimeError(f"cannot read {server.target.parent / 'weights' / 'x.bin'}")

    monkeypatch.setattr(Completions, "generate", broken)
    r = httpx.post(server.url + "/v1/chat/completions", json={"messages": MSGS}, timeout=60)
    assert r.status_code == 500
    assert str(server.target.parent) not in r.text and "x.bin" in r.json()["error"]["message"]


def test_scrub_keeps_urls_and_names_and_drops_folders():
    from engine.serving.server.redact import scrub

    home = str(Path.home())
    assert scrub(f"{home}/models/t.gguf: could not load") == "t.gguf: could not load"
    assert scrub("see http://127.0.0.1:8080/v1/models and 3/4 tokens/s") == \
        "see http://127.0.0.1:8080/v1/models and 3/4 tokens/s"
    served = SimpleNamespace(id="my-model", engine=SimpleNamespace(target=SimpleNamespace(path=Path("/m/a/t.gguf"))),
                             draft=None, has_draft_model=False)
    assert scrub("/m/a/t.gguf: out of memory", served) == "my-model: out of memory"


# -- request bodies ------------------------------------------------------------------------------
def test_an_empty_body_says_so(server):
    r = httpx.post(server.url + "/v1/chat/completions", content=b"", headers={"Content-Type": "application/json"},
                   timeout=30)
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("the request body is empty; send a JSON object")


@pytest.mark.parametrize("params", [{"type": "string"}, {"type": "array", "items": {"type": "string"}},
                                    {"description": "no type"}])
def test_a_tool_whose_parameters_are_not_an_object_is_a_400_naming_it(server, params):
    tools = [{"type": "function", "function": {"name": "say", "parameters": params}}]
    r = httpx.post(server.url + "/v1/chat/completions", json={"messages": MSGS, "tools": tools, "max_tokens": 4},
                   timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert "'say'" in err["message"] and "'object'" in err["message"]
    assert err["param"].startswith("tools[0].function")


def test_object_and_omitted_tool_parameters_are_still_accepted(server):
    for fn in ({"name": "a"}, {"name": "b", "parameters": {}},
               {"name": "c", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}):
        r = httpx.post(server.url + "/v1/chat/completions",
                       json={"messages": MSGS, "tools": [{"type": "function", "function": fn}], "max_tokens": 2},
                       timeout=120)
        assert r.status_code == 200, r.text
