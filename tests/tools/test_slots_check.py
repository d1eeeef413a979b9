"""tools/slots_check.py (issue #48's Done-when as a client sees it) on a tiny model that carries
FIM tokens, its servers in this process: every phase on a fresh server, the infill beside a
chat and the four chats counted and compared, the table saying each figure against its bar;
and the real `tandem serve` child it starts for the default pair comes up and stops."""

from __future__ import annotations

import contextlib
import json

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.models.tinymodel import FIM_TOKENS, chain_through, make_vocab, write_model  # noqa: E402
from tools import slots_check  # noqa: E402


@pytest.fixture(scope="module")
def fim_model(tmp_path_factory):
    v = make_vocab(fim=True)
    ids = [v.id(FIM_TOKENS["fim_mid"])] + [v.id(c) for c in "abcdefghijklm"] + [2]
    return write_model(tmp_path_factory.mktemp("fim") / "fim.gguf", vocab=v, chain=chain_through(ids), name="fim")


@pytest.fixture
def starts(fim_model):
    """A factory of fresh in-process servers with 2 slots, and the URLs it gave."""
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    given: list[str] = []

    @contextlib.contextmanager
    def server():
        eng = Engine(fim_model, n_ctx=512, metrics_log=False, calibration=False)
        try:
            with ServerThread(create_app(ServedModel(eng, "m", draft="lookup", lookahead=4),
                                         ServerConfig(parallel=2, list_catalog=False))) as srv:
                given.append(srv.url)
                yield srv.url
        finally:
            eng.close()

    return server, given


def test_both_checks_run_each_phase_on_a_fresh_server_and_count_every_request(starts):
    server, given = starts
    infills, fours = slots_check.run(server, repeat=2, draft=None, chat_tokens=24, max_tokens=6)
    assert len(given) == 8 and len(set(given)) == 8  # 2 repetitions x (alone, beside, after, at once)
    assert [p.repeat for p in infills] == [0, 1] and [p.repeat for p in fours] == [0, 1]
    for p in infills:
        assert p.alone_s > 0 and p.beside_s > 0 and isinstance(p.chat_streaming, bool) and p.same_text
    for p in fours:
        assert p.errors == 0 and p.identical == 4 and p.after_tok_s > 0 and p.once_tok_s > 0
    md = slots_check.table(infills, fours)
    assert "the bar: at most 2x" in md and "the bar: at least 1.10x" in md and "4/4" in md
    assert md.count("| 1 |") == 2 and md.count("| 2 |") == 2


def test_an_infill_pair_whose_chat_ended_first_is_not_counted():
    pairs = [slots_check.InfillPair(0, 1.0, 1.5, True, True), slots_check.InfillPair(1, 1.0, 9.0, False, True)]
    fours = [slots_check.FourPair(0, 10.0, 12.0, 3, 0)]
    md = slots_check.table(pairs, fours)
    assert "1.50x (1.50-1.50) of its time alone" in md and "1 of 2 pairs counted" in md
    assert "1.20x (1.20-1.20)" in md and "identical texts 3-3 of 4" in md


def test_the_command_writes_its_results(starts, tmp_path, monkeypatch, capsys):
    server, given = starts
    seen: list[tuple[str, ...]] = []

    def fake_served(*options):
        seen.append(options)
        return server()

    monkeypatch.setattr(slots_check, "served", fake_served)
    out = tmp_path / "check"
    assert slots_check.main(["--target", "fim.gguf", "--parallel", "2", "--chat-tokens", "12", "--max-tokens", "4",
                             "--repeat", "1", "--out", str(out)]) == 0
    assert seen[0] == ("--target", "fim.gguf", "--parallel", "2", "--ctx", "2048", "--no-history-draft", "--alias", "m")
    data = json.loads((out / "results.json").read_text())
    assert len(data["infill"]) == 1 and len(data["four"]) == 1
    assert (out / "table.md").read_text().startswith("| repetition |") and "four at once" in capsys.readouterr().out


def test_the_served_child_comes_up_answers_and_stops(tiny_target):
    from tools.serve_process import served

    with served("--target", str(tiny_target), "--ctx", "256", "--draft", "none", "--no-history-draft",
                "--alias", "m") as base:
        assert httpx.get(base + "/health", timeout=30).status_code == 200
        slots_check.warm_up(lambda: httpx.Client(timeout=120), base)  # the tool's requests name the model "m"
    with pytest.raises(httpx.HTTPError):
        httpx.get(base + "/health", timeout=5)


def test_a_child_that_cannot_start_ends_the_tool_with_its_own_words(tmp_path):
    from tools.serve_process import served

    with pytest.raises(SystemExit, match="the server stopped:.*"):
        with served("--target", str(tmp_path / "missing.gguf")):
            pass
