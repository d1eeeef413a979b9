"""tools/agent_check.py runs every client check to the end and reports each as one line:
on a scripted model that writes no call, the tool checks fail by name, the rest pass."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
for client in ("openai", "anthropic", "ollama", "httpx"):
    pytest.importorskip(client)

from engine import Engine  # noqa: E402
from engine.models.tinymodel import FIM_TOKENS, chain_through, make_vocab, write_model  # noqa: E402


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    v = make_vocab(fim=True)
    ids = [v.id(FIM_TOKENS["fim_mid"])] + [v.id(c) for c in "abcdefghijklm"] + [2]
    path = write_model(tmp_path_factory.mktemp("agent") / "fim.gguf", vocab=v, chain=chain_through(ids), name="fim")
    eng = Engine(path, n_ctx=1024, metrics_log=False, calibration=False)
    srv = ServerThread(create_app(ServedModel(eng, "fim"), ServerConfig(any_model_name=True))).start()
    yield srv.url
    srv.stop()
    eng.close()


def test_every_check_reports_one_line_and_the_tool_checks_fail_by_name(url, capsys):
    from tools import agent_check

    assert agent_check.main(["--url", url]) == 1
    lines = capsys.readouterr().out.splitlines()
    verdicts = {line[5:].split(":")[0]: line[:4] for line in lines}
    assert verdicts["openai"] == "FAIL" and verdicts["anthropic"] == "FAIL"  # the scripted model calls nothing
    assert verdicts["/infill"] == "ok  " and verdicts["/v1/responses through the openai SDK"] == "ok  "
    assert verdicts["/api/tags through the ollama client"] == "ok  "
    assert all(line[:4] in ("ok  ", "FAIL") for line in lines) and len(lines) == 6
