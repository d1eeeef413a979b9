"""The long-prompt suites (issue 47, item 6): documents asked about by question kind, FIM with
repository context, agent sessions; tuning and held-out written apart; kept out of the default
set; every prompt within a 4096-token context with room for the answer; and the report's
first token and wall-clock per kind, on synthetic runs and end to end on tiny models."""

from __future__ import annotations

import json
import re

import pytest

from engine import Engine
from engine.cli.main import main as cli
from engine.measure import bench, bench_report
from engine.measure import suites as bench_suites
from engine.measure.bench import Run, plan_configs, summarize
from engine.measure.bench_long import by_kind, long_markdown
from engine.measure.suites import KINDS, BenchError, load_suite
from conftest import real_model

LONG = ("long_agent", "long_documents", "long_fim")
CONTEXT = 4096  # the bench's default --ctx, and the app's
ANSWER_ROOM = 256  # the --max-tokens docs/benchmarks.md runs the long suites with
ATTACHED = re.compile(r"\AAttached file `[^`]+`:\n\n```\n(.*)\n```\n\n(?:(?!\n```).)+\Z", re.S)  # the document, then the question


def _all_long():
    return [(name, load_suite(name)) for name in bench_suites.builtin_suites("long")]


def test_the_long_suites_are_named_and_kept_out_of_the_default_set():
    assert bench_suites.builtin_suites("long") == list(LONG) + [f"heldout/{n}" for n in LONG]
    default = bench_suites.builtin_suites()
    assert not any(bench_suites.is_long(n) for n in default) and "agent_runs" in default
    assert bench_suites.every_builtin_suite() == default + bench_suites.builtin_suites("long")
    assert bench_suites.suite_set("heldout/long_fim") == "heldout" and bench_suites.suite_set("long_fim") == "tuning"
    listing = "\n".join(bench_suites.listing())
    assert re.search(r"long_documents +tuning +12 prompts +long prompts, not in the default set; kinds: quote, extract, "
                     r"summary", listing)
    assert re.search(r"heldout/long_fim +heldout +3 prompts", listing)


def test_document_questions_come_in_three_kinds_per_document():
    for name, least in (("long_documents", 4), ("heldout/long_documents", 3)):
        docs: dict[str, list[str]] = {}
        for line in (bench_suites.SUITES_DIR / f"{name}.jsonl").read_text().splitlines():
            obj = json.loads(line)
            docs.setdefault(obj["document"], []).append(obj["kind"])
        assert len(docs) >= least, name
        assert all(sorted(kinds) == sorted(KINDS) for kinds in docs.values()), docs
        s = load_suite(name)
        assert [p.kind for p in s.prompts] == [k for kinds in docs.values() for k in kinds]
        for p in s.prompts:
            body = ATTACHED.search(p.prompt)  # the document as the app attaches it, then the question
            assert body and 5500 <= len(body.group(1)) <= 8000, p.id  # the exact bound: the tokenizer test below


def test_fim_and_agent_lines_have_their_parts():
    for name in ("long_fim", "heldout/long_fim"):
        for p in load_suite(name).prompts:
            assert p.fim is not None and p.prompt is None and not p.chat
            assert p.fim.prefix.strip() and p.fim.suffix.strip() and len(p.fim.extra) >= 2, p.id
            assert all("/" in e.filename and e.text.strip() for e in p.fim.extra)  # repository/path, as an editor sends
    for name in ("long_agent", "heldout/long_agent"):
        for p in load_suite(name).prompts:
            msgs = p.prompt
            assert msgs[0]["role"] == "system" and '"parameters"' in msgs[0]["content"], p.id  # tool definitions
            calls = [m for m in msgs if m["role"] == "assistant"]
            results = [m for m in msgs if m["content"].startswith("Tool result: ")]
            assert len(calls) >= 3 and len(results) == len(calls) and msgs[-1]["role"] == "user", p.id
            assert all("tool" in json.loads(m["content"]) for m in calls)


def test_heldout_long_suites_share_nothing_with_the_tuning_ones():
    def text(suite) -> str:
        parts = []
        for p in suite.prompts:
            if p.fim is not None:
                parts += [p.fim.prefix, p.fim.suffix] + [e.text for e in p.fim.extra]
            else:
                parts.append(json.dumps(p.prompt))
        return "\n".join(parts)

    for n in LONG:
        tuning, held = load_suite(n), load_suite(f"heldout/{n}")
        assert not {p.id for p in tuning.prompts} & {p.id for p in held.prompts}
        # not derived: no sentence or line of code of one appears in the other
        lines = {x.strip() for x in re.split(r"\n|\\n|(?<=\.) ", text(tuning)) if len(x.strip()) > 30}
        shared = [x for x in lines if x in text(held)]
        assert not shared, (n, shared[:3])


def test_a_suite_refuses_a_bad_kind_a_bad_fim_and_a_repeated_id(tmp_path):
    f = tmp_path / "long_mine.jsonl"
    for bad, why in (({"prompt": "q", "kind": "poem"}, "'kind' must be one of quote, extract, summary"),
                     ({"fim": {"prefix": "a"}}, "'fim' must be an object with text 'prefix' and 'suffix'"),
                     ({"fim": {"prefix": "a", "suffix": "b", "extra": ["x"]}}, "'fim.extra' must be a list"),
                     ({"nope": 1}, "needs 'prompt', 'messages' or 'fim'")):
        f.write_text(json.dumps(bad) + "\n")
        with pytest.raises(BenchError, match=why):
            load_suite(str(f))
    f.write_text(json.dumps({"id": "a", "prompt": "x"}) + "\n" + json.dumps({"id": "a", "prompt": "y"}) + "\n")
    with pytest.raises(BenchError, match=":2: a second prompt with the id 'a'"):
        load_suite(str(f))


def test_every_long_prompt_fits_the_context_with_the_answer_real_tokenizer():
    """Counted with Qwen2.5's own tokenizer and chat template, as the engine builds the prompt
    (FIM: laid out as /infill does); skipped where the default pair's target is not in the store."""
    path = real_model("qwen2.5-coder-1.5b-instruct-q4_k_m")
    if path is None:
        pytest.skip("the default pair's target (qwen2.5-coder-1.5b-instruct-q4_k_m) is not in the store: token counts "
                    "unchecked here")
    from engine.decoding.engine import prompt_tokens
    from engine.decoding.prompting.fim_layout import infill_tokens
    from engine.llamacpp.llama import Model

    vocab = Model(path, vocab_only=True)
    fim = vocab.fim_tokens()
    for name, suite in _all_long():
        for p in suite.prompts:
            if p.fim is not None:
                n = len(infill_tokens(vocab, fim, p.fim.prefix, p.fim.suffix, p.fim.extra, n_ctx=CONTEXT,
                                      n_predict=ANSWER_ROOM))
                whole = sum(len(vocab.tokenize(t, add_special=False))
                            for t in [p.fim.prefix, p.fim.suffix] + [e.text for e in p.fim.extra])
                assert n >= whole, (p.id, "the layout cut part of the context")  # nothing dropped at 4096
                assert 1000 <= whole <= 2000, (p.id, whole)
            else:
                n = len(prompt_tokens(vocab, p.prompt, chat=p.chat))
                assert n >= 1200, (name, p.id, n)
            assert n + ANSWER_ROOM <= CONTEXT, (name, p.id, n)
            if p.kind is not None:
                document = ATTACHED.search(p.prompt).group(1)
                assert 1200 <= len(vocab.tokenize(document, add_special=False)) <= 1800, p.id


def _run(suite: str, prompt: str, kind: str | None, cfg: str, mode: str, rep: int, ttft: float, wall: float,
         tps: float, sync: float = 0.0) -> Run:
    return Run(suite, prompt, cfg, mode, 0 if mode == "target" else "auto", rep, 100, ttft, tps, 0.5, 1.5, 10, 10, 5,
               "length", "", [], wall_s=wall, kind=kind, prompt_tokens=1500, draft_sync_s=sync)


def test_the_report_gives_first_token_and_wall_clock_per_kind():
    runs = []
    for rep in (0, 1):
        for pid, kind, gain in (("w_quote", "quote", 1.3), ("w_summary", "summary", 0.9)):
            runs.append(_run("long_documents", pid, kind, "target", "target", rep, 16.0, 24.0, 12.0))
            runs.append(_run("long_documents", pid, kind, "auto", "auto", rep, 16.8, 24.0 / gain, 12.0 * gain, 0.8))
        runs.append(_run("heldout/long_fim", "f1", None, "target", "target", rep, 20.0, 30.0, 10.0))
        runs.append(_run("heldout/long_fim", "f1", None, "lookup", "lookup", rep, 20.0, 25.0, 15.0))
        runs.append(_run("chat", "c", None, "target", "target", rep, 0.1, 5.0, 20.0))  # not a long suite
    rows = by_kind(runs)
    assert [(r.suite, r.kind, r.config) for r in rows] == [
        ("long_documents", "quote", "target"), ("long_documents", "quote", "auto"),
        ("long_documents", "summary", "target"), ("long_documents", "summary", "auto"),
        ("heldout/long_fim", "all", "target"), ("heldout/long_fim", "all", "lookup")]
    quote, summary = rows[1], rows[3]
    assert quote.wall_vs_target == pytest.approx(1.3) and summary.wall_vs_target == pytest.approx(0.9)
    assert quote.ttft_vs_target == pytest.approx(16.8 / 16.0) and quote.ttft_s == pytest.approx(16.8)
    assert quote.decode_vs_target == pytest.approx(1.3) and quote.draft_read_s == pytest.approx(0.8)
    assert rows[0].wall_vs_target is None and rows[0].wall_s == pytest.approx(24.0) and rows[0].prompt_tokens == 1500
    md = "\n".join(long_markdown(rows))
    assert "| TTFT s | first token vs target | wall s | wall-clock vs target | decode tok/s |" in md
    assert "| long_documents | quote | auto | 2 | 1500 | 16.80 | 1.05x | 18.46 | **1.30x** | 15.6 | 1.30x | 0.80 |" in md
    assert "| long_documents | summary | auto | 2 | 1500 | 16.80 | 1.05x | 26.67 | **0.90x** |" in md
    assert "| heldout/long_fim | all | target | 2 | 1500 | 20.00 | – | 30.00 | – | 10.0 | – | 0.00 |" in md
    res = bench.BenchResult(runs, summarize(runs), {"repeat": 2}, {"verify_ms": {}, "draft_ms_per_token": {}}, [], rows)
    summary_md = bench_report.summary_markdown(res)
    assert "### Long prompts: first token and wall-clock" in summary_md and "| chat |" in summary_md
    assert long_markdown(by_kind([r for r in runs if r.suite == "chat"])) == []  # no long suite: no section


@pytest.fixture(scope="module")
def fim_model(tmp_path_factory):
    """A tiny scripted model with FIM tokens (the /infill tests' kind)."""
    from engine.models.tinymodel import FIM_TOKENS, chain_through, make_vocab, write_model

    v = make_vocab(fim=True)
    ids = [v.id(FIM_TOKENS["fim_mid"])] + [v.id(c) for c in "abcdefgh"] + [2]
    return write_model(tmp_path_factory.mktemp("fim") / "fim.gguf", vocab=v, chain=chain_through(ids), name="fim")


def _tiny_long_suite(tmp_path):
    f = tmp_path / "long_tiny.jsonl"
    lines = [{"id": "d_quote", "kind": "quote", "prompt": "the value of the item " * 6, "chat": False},
             {"id": "d_summary", "kind": "summary", "prompt": "count the items of the value " * 6, "chat": False},
             {"id": "edit", "fim": {"prefix": "def count(items):\n    ", "suffix": "\n    return n\n",
                                    "extra": [{"filename": "repo/a.py", "text": "abcdefgh\n" * 8}]}}]
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return f


def test_a_long_suite_end_to_end_on_a_tiny_fim_model(fim_model, tmp_path):
    eng = Engine(fim_model, n_ctx=512, metrics_log=False, calibration=False)
    try:
        suite = load_suite(str(_tiny_long_suite(tmp_path)))
        res = bench.run_bench(eng, [suite], plan_configs("lookup", modes=("target", "fixed"), sweep=(2,)), repeat=1,
                              max_tokens=8, warmup=False)
    finally:
        eng.close()
    fim_runs = [r for r in res.runs if r.prompt_id == "edit"]
    assert len(fim_runs) == 2 and all(r.prompt_tokens > 80 for r in fim_runs)  # the prefix, suffix and a.py laid out
    assert fim_runs[0].text.startswith("abc")  # the scripted model answers after FIM_MID: the layout reached it
    assert {(r.kind, r.config) for r in res.by_kind} == {(k, c) for k in ("quote", "summary", "all")
                                                         for c in ("target", "lookup k=2")}
    files = bench_report.write_reports(res, tmp_path / "out")
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "### Long prompts: first token and wall-clock" in md and "| long_tiny | quote | lookup k=2 | 1 |" in md
    assert json.loads((tmp_path / "out" / "results.json").read_text())["by_kind"][0]["kind"] == "quote"
    assert any(f.name == "runs.jsonl" for f in files)


def test_a_target_without_fim_tokens_skips_the_fim_prompts_by_name(tiny_target, tmp_path, capsys):
    suite = _tiny_long_suite(tmp_path)
    rc = cli(["bench", "--target", str(tiny_target), "--draft", "lookup", "--suite", str(suite), "--repeat", "1",
              "--max-tokens", "6", "--lookahead", "2", "--modes", "target,fixed", "--no-warmup", "--ctx", "512"])
    assert rc == 0
    captured = capsys.readouterr()
    assert "tandem: skipped long_tiny/edit: the target has no fill-in-the-middle tokens" in captured.err
    assert "| long_tiny | summary | lookup k=2 | 1 |" in captured.out
    assert "- long_tiny/edit: the target has no fill-in-the-middle tokens" in captured.out  # the report's skipped list
    only_fim = tmp_path / "long_fim_only.jsonl"
    only_fim.write_text(suite.read_text().splitlines()[-1] + "\n")
    assert cli(["bench", "--target", str(tiny_target), "--suite", str(only_fim), "--no-warmup"]) == 2
    assert "no prompt of these suites can run: the target has no fill-in-the-middle tokens" in capsys.readouterr().err


def test_bench_list_names_the_long_suites_without_a_model(capsys):
    assert cli(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "long_documents" in out and "heldout/long_agent" in out and "code_editing" in out
