"""`tandem serve --library DIR` (issue #50): a chat request setting "library": true is answered
from the folder with its sources (in the body, or in a last chunk of their own when streamed),
a file added while the server runs is found at the next question (the folder is watched),
GET /v1/library says what the index holds; a server without a folder, or a "library" that is
not true or false, is one clear line. Real HTTP against a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
from types import SimpleNamespace

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("docx")
pytest.importorskip("openpyxl")
pytest.importorskip("pypdf")
pytest.importorskip("watchdog")

from brief_files import brief, brief_folder  # noqa: E402
from engine import Engine  # noqa: E402
from engine.cli.main import main as cli  # noqa: E402
from engine.library import Library  # noqa: E402


@pytest.fixture(scope="module")
def server(tiny_target, tmp_path_factory):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    folder = tmp_path_factory.mktemp("served") / "briefs"
    brief_folder(folder, 10)
    (folder / "program.txt").write_bytes(bytes(range(256)) * 8)
    lib = Library(folder, watch=True)
    lib.update()
    eng = Engine(tiny_target, n_ctx=1024, metrics_log=False)
    app = create_app(ServedModel(eng, "tiny"), ServerConfig(list_catalog=False, library=lib))
    srv = ServerThread(app).start()
    yield SimpleNamespace(eng=eng, url=srv.url, folder=folder, lib=lib)
    srv.stop()
    eng.close()
    lib.close()


def _ask(server, question: str, **body):
    return httpx.post(f"{server.url}/v1/chat/completions", timeout=120, json={
        "model": "tiny", "messages": [{"role": "user", "content": question}], "max_tokens": 8, "temperature": 0,
        "library": True, **body})


def test_an_answer_from_the_folder_carries_its_sources(server):
    aurora = brief(0)
    r = _ask(server, f"Who leads project {aurora.project} and what is its budget?")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["message"]["content"] is not None
    first = body["sources"][0]
    assert first["n"] == 1 and first["file"] == aurora.file and ("page" in first or "section" in first)
    assert body["usage"]["prompt_tokens"] > 60  # the passages went into the prompt


def test_a_streamed_answer_ends_with_its_sources_in_a_chunk_of_their_own(server):
    aurora = brief(0)
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", timeout=120, json={
            "model": "tiny", "messages": [{"role": "user", "content": f"Who leads project {aurora.project}?"}],
            "max_tokens": 8, "temperature": 0, "stream": True, "library": True}) as r:
        assert r.status_code == 200
        data = [line[len("data: "):] for line in r.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    last = json.loads(data[-2])
    assert last["choices"] == [] and last["sources"][0]["file"] == aurora.file


def test_a_file_added_while_the_server_runs_is_found_at_the_next_question(server):
    (server.folder / "kestrel.md").write_text("# Project Kestrel\n\nProject Kestrel is led by Zora Quill.\n",
                                              encoding="utf-8")
    deadline = time.monotonic() + 20
    while not server.lib.watch.dirty and time.monotonic() < deadline:  # the watch has seen it
        time.sleep(0.05)
    r = _ask(server, "Who leads project Kestrel?")
    assert r.status_code == 200 and r.json()["sources"][0]["file"] == "kestrel.md"


def test_the_library_endpoint_says_what_the_index_holds(server):
    body = httpx.get(f"{server.url}/v1/library", timeout=30).json()
    assert body["folder"] == str(server.folder.resolve()) and body["watching"] is True
    assert body["files"] >= 10 and body["passages"] >= body["files"]
    assert [u["file"] for u in body["unreadable"]] == ["program.txt"]
    assert body["vectors"] == 0  # no embedding model: ranked by words alone


def test_a_library_that_is_not_true_or_false_is_one_line(server):
    r = _ask(server, "Who leads project Aurora?", library="yes")
    assert r.status_code == 400 and r.json()["error"]["message"] == "'library' must be true or false, got 'yes'"


def test_asking_a_server_without_a_folder_is_one_line(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    srv = ServerThread(create_app(ServedModel(eng, "tiny"), ServerConfig(list_catalog=False))).start()
    try:
        r = httpx.post(f"{srv.url}/v1/chat/completions", timeout=60, json={
            "model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "library": True})
        assert r.status_code == 400
        assert r.json()["error"]["message"] == "'library': this server was started without --library DIR"
        assert httpx.get(f"{srv.url}/v1/library", timeout=30).status_code == 404
    finally:
        srv.stop()
        eng.close()


def test_serve_with_a_folder_that_is_not_there_is_one_line_before_the_model_loads(capsys, tmp_path, tiny_target):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli(["serve", "--target", str(tiny_target), "--port", str(port), "--library", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"tandem: error: {tmp_path / 'nowhere'}: no such folder", err


def test_every_chat_api_answers_from_the_folder_with_its_sources(server):
    """Responses, Anthropic and Ollama take "library": true as the chat API does: the sources in
    the body, and streamed in the stream's last piece (the completed response, message_delta,
    the done line)."""
    aurora = brief(0)
    q = f"Who leads project {aurora.project} and what is its budget?"
    msgs = [{"role": "user", "content": q}]
    common = {"model": "tiny", "temperature": 0, "library": True}
    bodies = {
        "/v1/responses": {**common, "input": q, "max_output_tokens": 8},
        "/v1/messages": {**common, "messages": msgs, "max_tokens": 8},
        "/api/chat": {**common, "messages": msgs, "stream": False, "options": {"num_predict": 8}},
    }
    for path, body in bodies.items():
        r = httpx.post(f"{server.url}{path}", json=body, timeout=120)
        assert r.status_code == 200, (path, r.text)
        assert r.json()["sources"][0]["file"] == aurora.file, path

    def last_data(path: str, body: dict) -> dict:
        with httpx.stream("POST", f"{server.url}{path}", json={**body, "stream": True}, timeout=120) as r:
            assert r.status_code == 200, path
            lines = [ln for ln in r.iter_lines() if ln]
        if path == "/api/chat":
            return json.loads(lines[-1])
        events = [json.loads(ln[len("data: "):]) for ln in lines if ln.startswith("data: ")]
        kinds = {"/v1/responses": ("response.completed", "response.incomplete"), "/v1/messages": ("message_delta",)}
        return next(e for e in events if e["type"] in kinds[path])

    assert last_data("/v1/responses", bodies["/v1/responses"])["response"]["sources"][0]["file"] == aurora.file
    assert last_data("/v1/messages", bodies["/v1/messages"])["sources"][0]["file"] == aurora.file
    done = last_data("/api/chat", bodies["/api/chat"])
    assert done["done"] is True and done["sources"][0]["file"] == aurora.file
    r = httpx.post(f"{server.url}/v1/messages", timeout=60, json={**bodies["/v1/messages"], "library": "yes"})
    assert r.status_code == 400 and "'library' must be true or false" in r.json()["error"]["message"]


def test_serve_library_with_an_embedding_model_ranks_by_meaning_and_a_bad_one_is_one_line(capsys, tmp_path, tiny_bert,
                                                                                         tiny_target):
    from engine.cli.serve import _open_library
    folder = tmp_path / "briefs"
    brief_folder(folder, 3)
    lib = _open_library(str(folder), str(tiny_bert))
    try:
        assert lib.embedder is not None and lib.held().vectors == lib.held().passages > 0
        assert lib.search("Who leads project Aurora?")[0].fused
    finally:
        lib.close()
        lib.embedder.close()
    assert "passages embedded; " in capsys.readouterr().err
    (tmp_path / "broken.gguf").write_bytes(b"no model here")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli(["serve", "--target", str(tiny_target), "--port", str(port), "--library", str(folder),
                "--embed-model", str(tmp_path / "broken.gguf")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tandem: error: ") and "broken.gguf" in err and "\n" not in err, err
