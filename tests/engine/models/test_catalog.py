"""The real models.toml: it parses, its entries are consistent, and the default pair's files
are exactly the bytes the project verified."""

from __future__ import annotations

import re
import tomllib

import pytest

from engine.models import catalog
from engine.models.catalog import CATALOG_PATH, CatalogError

SHA = re.compile(r"^[0-9a-f]{64}$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


@pytest.fixture(scope="module")
def cat():
    return catalog.load(CATALOG_PATH)


@pytest.fixture(scope="module")
def raw():
    with open(CATALOG_PATH, "rb") as f:
        return tomllib.load(f)


def test_schema_loads(cat, raw):
    assert raw["schema"] == 1
    assert cat.pairs and cat.models
    assert cat.default_pair in cat.pairs


def test_ids_are_unique(cat, raw):
    pair_ids = [p["id"] for p in raw["pairs"]]
    assert len(pair_ids) == len(set(pair_ids))
    assert not set(pair_ids) & set(cat.models), "a pair id equal to a model id would make `tandem pull X` ambiguous"
    files = [(f.repo, f.filename) for m in cat.models.values() for f in m.files]
    assert len(files) == len(set(files)), "two models point at the same file"


def test_files_have_sizes_hashes_and_pinned_revisions(cat):
    for m in cat.models.values():
        assert m.files, m.id
        assert COMMIT.match(m.revision), f"{m.id}: pin a commit, not {m.revision!r}"
        for f in m.files:
            assert f.bytes > 0, f.filename
            assert f.sha256 is not None and SHA.match(f.sha256), f.filename
            assert f.filename.endswith(".gguf"), f.filename
            assert f.repo == m.repo
            for mir in f.mirrors:
                assert mir.kind == "pypi-chunks" and mir.count >= 1
                parts = mir.parts()
                assert len(parts) == mir.count
                assert len({r for r, _ in parts}) == mir.count, "each chunk is its own package"


def test_model_numbers_are_sane(cat):
    for m in cat.models.values():
        assert m.params_b > 0, m.id
        if m.kind == "chat":  # an embedding model (an encoder) keeps no KV cache: no cache numbers
            assert m.n_layers > 0 and m.n_kv_heads > 0 and m.head_dim > 0, m.id
        assert m.context_length >= 2048, m.id
        # a Q4 file holds 4.5-6 bits per parameter (small models more: their embeddings stay wider);
        # catches a size or parameter count off by a factor
        bits = m.bytes * 8 / (m.params_b * 1e9)
        if m.quant.upper().startswith("Q4"):
            assert 4.0 < bits < 10.0, f"{m.id}: {bits:.2f} bits per parameter"


def test_pairs_share_a_tokenizer_and_the_draft_is_smaller(cat):
    for p in cat.pairs.values():
        assert (p.target.tokenizer != p.draft.tokenizer) == p.bridged, p.id
        if p.drafter == "mtp":  # the target drafts with its own MTP layers
            assert p.draft is p.target and p.target.mtp_layers >= 1, p.id
        else:
            assert p.draft.params_b < p.target.params_b, p.id
        assert 1 <= p.lookahead <= 16


def test_the_catalog_has_2026_models_drafting_with_their_own_mtp_head(cat):
    mtp = [p for p in cat.pairs.values() if p.drafter == "mtp"]
    assert {p.target.title.split(" (")[0] for p in mtp} >= {"Qwen3.5 0.8B", "Qwen3.5 4B", "Qwen3.6 27B",
                                                            "Qwen3.6 35B-A3B MoE"}
    assert all(p.target.files[0].sha256 and p.target.files[0].revision != "main" for p in mtp)
    gemma = cat.pair("gemma-4-e2b-assistant")  # a separate MTP drafter file, reading the target's cache
    assert gemma.draft.files[0].filename == "mtp-gemma-4-E2B-it.gguf" and gemma.draft.files[0].sha256


def test_default_pair_exact_files(cat):
    pair = cat.default
    assert pair.id == "qwen2.5-coder-1.5b"
    (t,) = pair.target.files
    (d,) = pair.draft.files
    assert t.filename == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert t.bytes == 1117320768
    assert t.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert t.repo == "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
    assert d.filename == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert d.bytes == 491400064
    assert d.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert d.repo == "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
    assert t.mirrors and d.mirrors, "the default pair must be fetchable when the Hub is not"


def test_parse_rejects_inconsistent_entries(raw):
    import copy

    bad = copy.deepcopy(raw)
    first = next(iter(bad["models"].values()))
    first["files"][0]["sha256"] = "XYZ"
    with pytest.raises(CatalogError, match="sha256"):
        catalog.parse(bad)
    bad = copy.deepcopy(raw)
    next(iter(bad["models"].values()))["files"][0]["bytes"] = 0
    with pytest.raises(CatalogError, match="bytes must be positive"):
        catalog.parse(bad)
    bad = copy.deepcopy(raw)
    bad["pairs"].append(dict(bad["pairs"][0]))
    with pytest.raises(CatalogError, match="duplicate id"):
        catalog.parse(bad)
    bad = copy.deepcopy(raw)
    p = bad["pairs"][0]
    other = next(mid for mid, m in bad["models"].items() if m["tokenizer"] != bad["models"][p["target"]]["tokenizer"])
    p["draft"] = other
    with pytest.raises(CatalogError, match="declare the pair bridged"):
        catalog.parse(bad)
    p["bridged"] = True
    catalog.parse(bad)  # another tokenizer, declared: drafts go through text
    p["draft"] = p["target"]
    with pytest.raises(CatalogError, match="a bridged pair has two"):
        catalog.parse(bad)


def test_an_mtp_catalog_pair_drafts_with_its_head(tmp_path):
    from engine.models import catalog
    from engine.models.catalog import CatalogError

    base = {
        "schema": 1, "default_pair": "q",
        "models": {"m": {"title": "M", "repo": "o/r", "quant": "Q8_0", "license": "apache-2.0", "context_length": 4096,
                         "tokenizer": "qwen35", "params_b": 0.8, "n_layers": 24, "n_kv_heads": 2, "head_dim": 256,
                         "mtp_layers": 1, "files": [{"filename": "m.gguf", "bytes": 10}]}},
        "pairs": [{"id": "q", "title": "Q", "target": "m", "draft": "m", "drafter": "mtp", "lookahead": 2,
                   "tags": [], "note": "n"}],
    }
    pair = catalog.parse(base).pair("q")
    assert pair.drafter == "mtp" and pair.draft_spec("/x/m.gguf") == "mtp"
    base["models"]["m"]["mtp_layers"] = 0
    with pytest.raises(CatalogError, match="'mtp' pair drafts with its target's own MTP layers"):
        catalog.parse(base)


def test_the_librarys_embedding_model_is_in_no_pair(cat):
    """The catalog's embedding model: pulled by its id, never a pair's target or draft, no cache
    to count, and the task prefixes nomic-embed-text was trained with."""
    [emb] = cat.embedding_models
    assert emb.id == "nomic-embed-text-v1.5-q8_0" and emb.kind == "embedding"
    assert (emb.files[0].filename, emb.files[0].bytes) == ("nomic-embed-text-v1.5.Q8_0.gguf", 146146432)
    assert emb.kv_bytes_per_token() == 0
    assert (emb.query_prefix, emb.document_prefix) == ("search_query: ", "search_document: ")
    assert all(emb not in p.models for p in cat.pairs.values())
    assert all(m.kind == "chat" for p in cat.pairs.values() for m in p.models)


def test_parse_keeps_embedding_models_out_of_pairs(raw):
    import copy

    bad = copy.deepcopy(raw)
    emb_id = next(mid for mid, m in bad["models"].items() if m.get("kind") == "embedding")
    bad["pairs"][0]["target"] = emb_id
    bad["pairs"][0]["bridged"] = True
    with pytest.raises(CatalogError, match="is an embedding model, not one that generates text"):
        catalog.parse(bad)
    bad = copy.deepcopy(raw)
    bad["models"][emb_id]["kind"] = "reranker"
    with pytest.raises(CatalogError, match="kind must be one of chat, embedding, not 'reranker'"):
        catalog.parse(bad)
    bad = copy.deepcopy(raw)
    chat = next(iter(bad["models"].values()))
    chat["query_prefix"] = "q: "
    with pytest.raises(CatalogError, match="belong to an embedding model"):
        catalog.parse(bad)
    bad = copy.deepcopy(raw)
    del chat["n_layers"]
    del next(iter(bad["models"].values()))["n_layers"]
    with pytest.raises(CatalogError, match="missing 'n_layers'"):  # a chat model still needs its cache numbers
        catalog.parse(bad)
