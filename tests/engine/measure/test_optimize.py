"""The draft optimiser: llama.cpp's quantiser bound in engine.llamacpp.llama, the requantised draft
loads and keeps greedy output identical to target alone, per-tensor fallbacks, the cost
model's break-even, the variant registry, the catalog's published-file route, the CLI."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType as T

from engine.models import draft_variants
from engine.llamacpp import ggml_devices, llama
from engine.llamacpp import quantize as quantize_mod
from engine.measure import optimize
from engine.decoding.engine import Engine
from engine.models.catalog import CatalogError
from engine.errors import ModelFileError
from engine.models.gguf_header import read_header
from engine.decoding.drafting.cost_model import Costs
from fakehub import fakehub, write_tiny_catalog  # noqa: F401  (fixture)

CURVE = {1: 0.030, 2: 0.040, 3: 0.054, 4: 0.066, 5: 0.075, 6: 0.090, 8: 0.120}  # CPU-like: k=4 at 2.2x


@pytest.fixture(scope="module")
def q4_draft(tiny_draft, tmp_path_factory) -> Path:
    return quantize_mod.quantize(tiny_draft, tmp_path_factory.mktemp("q") / "draft.q4_0.gguf", "q4_0")


# -- quantising ---------------------------------------------------------------------------------
def test_quantize_writes_a_q4_0_file_that_loads(q4_draft, tiny_draft):
    h = read_header(q4_draft)
    assert optimize.file_type_name(h) == "q4_0"
    matrices = [t for t in h.tensors if len(t.shape) >= 2]
    assert {T(t.ggml_type) for t in matrices if t.name.startswith("blk.")} == {T.Q4_0}
    assert q4_draft.stat().st_size < tiny_draft.stat().st_size / 3
    assert not q4_draft.with_name(q4_draft.name + ".partial").exists()
    m = llama.Model(q4_draft)
    assert m.n_vocab == llama.Model(tiny_draft, vocab_only=True).n_vocab
    m.close()


def test_requantised_draft_keeps_greedy_output_identical(tiny_target, q4_draft, tiny_draft):
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    try:
        for prompt in ("the value of the", "def count(items):", "import data as"):
            base = eng.generate(prompt, draft_model=None, max_tokens=40)
            for draft in (q4_draft, tiny_draft):
                out = eng.generate(prompt, draft_model=draft, lookahead=4, max_tokens=40)
                assert out.tokens == base.tokens, (prompt, draft.name)
                assert out.stats.drafted > 0
    finally:
        eng.close()


def test_quantize_errors_are_one_clear_line(tiny_target, q4_draft, tmp_path):
    with pytest.raises(quantize_mod.QuantizeError, match="unknown quantisation type 'q4_7'"):
        quantize_mod.quantize(tiny_target, tmp_path / "x.gguf", "q4_7")
    with pytest.raises(quantize_mod.QuantizeError, match="requantizing from type q4_0 is disabled"):
        quantize_mod.quantize(q4_draft, tmp_path / "y.gguf", "q8_0", allow_requantize=False)
    with pytest.raises(ModelFileError, match="no such file|not found|does not exist"):
        quantize_mod.quantize(tmp_path / "missing.gguf", tmp_path / "z.gguf", "q4_0")
    assert not list(tmp_path.iterdir()), "a failed quantisation leaves no file, partial or whole"
    # allowed: a quantised file requantised to another type
    out = quantize_mod.quantize(q4_draft, tmp_path / "q8.gguf", "q8_0", allow_requantize=True)
    assert optimize.file_type_name(read_header(out)) == "q8_0"


def test_fallback_tensors_follow_row_width(tmp_path, vocab):
    from engine.models.tinymodel import write_model

    # 96-wide rows: a multiple of Q4_0's 32-block, not of the K-quants' 256 (as the 0.5B's 896)
    p = write_model(tmp_path / "w96.gguf", n_embd=96, n_head=4, n_kv_head=2, n_ff=256, n_layer=1, vocab=vocab)
    h = read_header(p)
    assert optimize.fallback_tensors(h, "q4_0") == []
    k = optimize.fallback_tensors(h, "q4_k_m")
    assert "blk.0.attn_q.weight" in k and "blk.0.ffn_down.weight" not in k  # ffn_down rows are 256 wide
    assert len(k) < optimize.weight_matrices(h)


# -- the cost model's verdicts ------------------------------------------------------------------
def test_break_even_solves_the_cost_model():
    c = 0.6 * CURVE[1]
    be = optimize.break_even(CURVE, c, alpha=0.7, goal=1.15)
    assert be.draft_cost_ratio == pytest.approx(0.6)
    speed = lambda a, per: Costs(sorted(CURVE.items()), per, 0.3, a).best(16).speedup  # noqa: E731
    assert be.ceiling == pytest.approx(speed(1.0, c))
    if be.alpha_needed is not None:
        assert speed(be.alpha_needed, c) >= 1.15 > speed(be.alpha_needed - 0.01, c)
    if be.cost_ratio_needed is not None:
        per = be.cost_ratio_needed * CURVE[1]
        assert speed(0.7, per) >= 1.15 > speed(0.7, per + 0.01 * CURVE[1])
    cheap = optimize.break_even(CURVE, 0.05 * CURVE[1], alpha=0.9, goal=1.15)
    assert cheap.alpha_needed is not None and cheap.alpha_needed < 0.9 and cheap.cost_ratio_needed > 0.05
    hopeless = optimize.break_even(CURVE, 1.5 * CURVE[1], alpha=0.5, goal=1.15)
    assert hopeless.alpha_needed is None and hopeless.ceiling < 1.15


def _measure(per: float, alpha: float, k: int = 4) -> optimize.DraftMeasure:
    m = optimize.DraftMeasure("d.gguf", "q4_0", 1, 1 / per, per, 100, int(100 * alpha), alpha, 2.0, 3, 3)
    c = optimize.costs_for(CURVE, per, alpha)
    m.best, m.at_k = c.best(16), c.predict(k)
    return m


def test_keep_only_when_the_predicted_speedup_improves():
    slow, fast = _measure(0.018, 0.9), _measure(0.010, 0.9)
    assert fast.best.speedup > slow.best.speedup
    assert optimize._pays_more(fast, slow, 1.01)
    assert not optimize._pays_more(slow, fast, 1.01)
    # faster but much less accurate: loses
    assert not optimize._pays_more(_measure(0.010, 0.3), slow, 1.01)
    # Auto's best k decides, not the fixed k the acceptance was measured at: a very cheap, less
    # accurate draft wins at k=1 although it loses at k=4
    cheap, accurate = _measure(0.003, 0.75), _measure(0.012, 0.95)
    assert cheap.at_k.speedup < accurate.at_k.speedup and cheap.best.speedup > accurate.best.speedup * 1.05
    assert optimize._pays_more(cheap, accurate, 1.01) and not optimize._pays_more(accurate, cheap, 1.01)
    # neither pays at any k: the one losing less at the measured k wins
    a, b = _measure(0.025, 0.3), _measure(0.020, 0.3)
    assert a.best.k == b.best.k == 0
    assert optimize._pays_more(b, a, 1.01) and not optimize._pays_more(a, b, 1.01)


# -- registry -----------------------------------------------------------------------------------
def test_registry_roundtrip(tmp_path, tiny_draft, q4_draft):
    assert draft_variants.preferred(tiny_draft, "cpu") == tiny_draft
    draft_variants.record(tiny_draft, "cpu", {"kept": True, "variant": str(q4_draft)})
    assert draft_variants.preferred(tiny_draft, "cpu") == q4_draft
    assert draft_variants.preferred(tiny_draft, "cuda") == tiny_draft, "a verdict holds for its backend only"
    draft_variants.record(tiny_draft, "cpu", {"kept": False, "variant": None})
    assert draft_variants.preferred(tiny_draft, "cpu") == tiny_draft
    draft_variants.record(tiny_draft, "cpu", {"kept": True, "variant": str(tmp_path / "gone.gguf")})
    assert draft_variants.preferred(tiny_draft, "cpu") == tiny_draft, "a deleted variant is not used"
    assert draft_variants.forget(tiny_draft, "cpu") is not None
    assert draft_variants.lookup(tiny_draft, "cpu") is None


# -- the catalog's preferred draft --------------------------------------------------------------
def test_catalog_names_the_published_q4_0_draft_for_cpu():
    from engine.models import catalog

    cat = catalog.load()
    pref = cat.default.preferred_draft("cpu")
    assert pref is not None and pref.quant == "Q4_0"
    (f,) = pref.files
    assert f.filename == "qwen2.5-coder-0.5b-instruct-q4_0.gguf" and f.repo == cat.default.draft.repo
    assert cat.default.preferred_draft("metal") is None
    assert cat.models["qwen2.5-coder-0.5b-instruct-q8_0"].files[0].bytes == 675710848


def test_catalog_rejects_a_bad_preferred_draft():
    import tomllib

    from engine.models import catalog

    with open(catalog.CATALOG_PATH, "rb") as fh:
        raw = tomllib.load(fh)
    raw["pairs"][0]["preferred_draft"] = {"cpu": "no-such-model"}
    with pytest.raises(CatalogError, match="preferred_draft.cpu 'no-such-model' is not a chat model in the catalog"):
        catalog.parse(raw)
    raw["pairs"][0]["preferred_draft"] = "q4_0"
    with pytest.raises(CatalogError, match="must be a table"):
        catalog.parse(raw)


# -- end to end: CLI, published file from the (fake) Hub, pair resolution ----------------------
@pytest.fixture
def tiny_pair_with_published_q4(fakehub, tiny_target, tiny_draft, q4_draft, tmp_path, monkeypatch):
    fakehub.add("org/t-GGUF", "t.gguf", tiny_target)
    fakehub.add("org/d-GGUF", "d.gguf", tiny_draft)
    fakehub.add("org/d-GGUF", "d-q4_0.gguf", q4_draft)
    q4 = fakehub.spec("org/d-GGUF", "d-q4_0.gguf")
    cat = write_tiny_catalog(tmp_path, fakehub.spec("org/t-GGUF", "t.gguf"), fakehub.spec("org/d-GGUF", "d.gguf"),
                             cpu_draft=q4)
    monkeypatch.setenv("TANDEM_CATALOG", str(cat))
    monkeypatch.setattr(ggml_devices, "current_backend", lambda: "cpu")
    return fakehub


def test_cli_fetches_the_published_file_measures_and_registers(tiny_pair_with_published_q4, capsys, monkeypatch):
    from engine.cli.main import main
    from engine.cli.common import resolve_pair

    assert main(["pull", "tiny"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(optimize, "_pays_more", lambda after, before, gain: True)  # timing-independent
    assert main(["optimize-draft", "--prompts", "2", "--max-tokens", "12", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["source"] == "catalog tiny-draft-q4_0 (downloaded)"
    assert res["kept"] is True and res["variant"].endswith("d-q4_0.gguf")
    for side in ("before", "after"):
        assert res[side]["identical"] == res[side]["compared"] == 2, "output is the target's, whatever the draft"
        assert res[side]["drafted"] > 0 and res[side]["alone_tokens_per_s"] > 0
    assert res["after"]["quant"] == "q4_0" and res["before"]["quant"] == "f32"
    assert set(res["verify_s"]) == {"1", "2", "3", "4", "5", "6", "8"}
    assert tiny_pair_with_published_q4.body_bytes_sent("d-q4_0.gguf") == res["after"]["size_bytes"]

    args = argparse.Namespace(pair=None, target=None, draft=None)
    _, draft = resolve_pair(args)
    assert Path(draft) == Path(res["variant"]), "the pair now drafts with the kept variant"
    assert main(["optimize-draft", "--forget"]) == 0
    assert "is used again" in capsys.readouterr().out
    _, draft = resolve_pair(args)
    assert Path(draft).name == "d.gguf"


def test_requantises_when_offline_and_drops_a_losing_variant(tiny_pair_with_published_q4, capsys, monkeypatch):
    from engine.cli.main import main

    assert main(["pull", "tiny"]) == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(optimize, "_pays_more", lambda after, before, gain: False)
    assert main(["optimize-draft", "--prompts", "1", "--max-tokens", "10"]) == 0
    out = capsys.readouterr().out
    assert "requantised" in out and "not kept" in out and "break-even:" in out
    assert "published Q4_0 file not fetched" in out
    assert not list(draft_variants.variants_dir().glob("*.gguf")), "a losing requantised copy is deleted"
    (entry,) = draft_variants.load().values()
    assert entry["kept"] is False and entry["variant"] is None and entry["after"]["quant"] == "q4_0"


def test_cli_errors_are_one_line(tiny_target, tiny_draft, q4_draft, no_byte_fallback, capsys):
    from engine.cli.main import main

    cases = [
        (["optimize-draft", "--target", str(tiny_target)], "give both --target and --draft"),
        (["optimize-draft", "--target", str(tiny_target), "--draft", str(q4_draft)], "already Q4_0"),
        (["optimize-draft", "--target", str(tiny_target), "--draft", str(no_byte_fallback)], "byte fallback"),
        (["optimize-draft", "--target", str(tiny_target), "--draft", str(tiny_draft), "--type", "q9_9"], "q9_9"),
        (["optimize-draft", "--target", str(tiny_target), "--draft", str(tiny_draft), "--k", "0"], "k must be"),
        (["optimize-draft", "--target", str(tiny_target), "--draft", "/nope.gguf"], "no such file"),
    ]
    for argv, needle in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("tandem: error:") and needle in err and len(err.strip().splitlines()) == 1, (argv, err)
