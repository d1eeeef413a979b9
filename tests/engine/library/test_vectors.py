"""The Library's vectors (engine/library/vectors.py): each passage embedded once and kept while
its file is unchanged, re-embedded when the file changes or another model is given, BM25 and
the vectors fused by reciprocal rank, a cancel keeping what was embedded, text ranking alone
unchanged without a model; and the same through llama.cpp with a tiny random BERT encoder,
whose file, if it cannot embed, is refused in one line."""

from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest

from engine.errors import EmbeddingsUnsupported, ModelFileError, TandemError
from engine.library import Library
from engine.library import vectors
from engine.library.search import RRF_K, search

# The stand-in's meanings: each word a unit vector, synonyms sharing one, so a question may find
# a passage by meaning with no word in common ("car" -> "automobile").
CONCEPTS = {"car": 0, "automobile": 0, "vehicle": 0, "tyres": 1, "wheels": 1, "banana": 2, "fruit": 2,
            "yellow": 3, "invoice": 4, "bill": 4, "paid": 5, "river": 6, "water": 6}


class ConceptEmbedder:
    """A deterministic embedder through the Library's interface: the normalised sum of the
    text's concepts; it notes every text it is asked for."""

    def __init__(self, name: str = "concepts-1", dims: int = 8):
        self.name, self.dims = name, dims
        self.texts: list[str] = []
        self.queries: list[str] = []

    def embed(self, texts, *, query=False, stop=None):
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            if stop is not None and stop():
                from engine.errors import Cancelled

                raise Cancelled("cancelled")
            (self.queries if query else self.texts).append(text)
            for word in text.lower().replace(".", " ").replace(",", " ").split():
                if word in CONCEPTS:
                    out[i, CONCEPTS[word]] += 1.0
            out[i, self.dims - 1] += 0.05  # no text is the zero vector
            out[i] /= np.linalg.norm(out[i])
        return out


def _folder(tmp_path, files: dict[str, str]):
    folder = tmp_path / "docs"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


FILES = {
    "garage.txt": "The automobile needs new tyres before winter.",
    "market.txt": "A banana is a yellow fruit sold at the market.",
    "office.txt": "The invoice was paid on Monday by the office.",
}


def _vectors(lib: Library) -> dict[int, bytes]:
    db = sqlite3.connect(lib.index)
    try:
        return dict(db.execute("SELECT id, vec FROM vectors"))
    finally:
        db.close()


def test_vectors_are_stored_once_and_kept_for_unchanged_files(tmp_path):
    folder = _folder(tmp_path, FILES)
    emb = ConceptEmbedder()
    with Library(folder, embedder=emb) as lib:
        report = lib.update()
        assert (report.passages, report.embedded, report.vectors, report.cancelled) == (3, 3, 3, False)
        assert sorted(t.split(",")[0] for t in emb.texts) == sorted(FILES)  # each passage named by its file
        stored = _vectors(lib)
        assert all(len(v) == 4 * emb.dims for v in stored.values())
        emb.texts.clear()
        again = lib.update()
        assert (again.embedded, again.vectors, emb.texts) == (0, 3, [])  # nothing embedded twice
        assert _vectors(lib) == stored
        assert report.to_dict()["embedded"] == 3 and again.to_dict()["vectors"] == 3


def test_a_changed_file_is_re_embedded_and_a_deleted_ones_vectors_go(tmp_path):
    folder = _folder(tmp_path, FILES)
    emb = ConceptEmbedder()
    with Library(folder, embedder=emb) as lib:
        lib.update()
        emb.texts.clear()
        (folder / "garage.txt").write_text("The vehicle has four new wheels.", encoding="utf-8")
        os.utime(folder / "garage.txt", ns=(1, 1))  # another time, whatever the clock's resolution
        (folder / "office.txt").unlink()
        report = lib.update()
        assert (report.changed, report.removed, report.embedded, report.vectors) == (1, 1, 1, 2)
        assert len(emb.texts) == 1 and emb.texts[0].startswith("garage.txt") and "wheels" in emb.texts[0]
        assert len(_vectors(lib)) == 2


def test_another_model_rebuilds_every_vector(tmp_path):
    folder = _folder(tmp_path, FILES)
    with Library(folder, embedder=ConceptEmbedder("concepts-1")) as lib:
        lib.update()
    other = ConceptEmbedder("concepts-2")
    with Library(folder, embedder=other) as lib:
        report = lib.update()
        assert (report.unchanged, report.embedded, report.vectors, len(other.texts)) == (3, 3, 3, 3)


def test_a_question_sharing_no_word_is_found_by_meaning(tmp_path):
    folder = _folder(tmp_path, FILES)
    question = "Which car must go to the mechanic?"  # no word of garage.txt's
    with Library(folder) as lib:
        lib.update()
        assert lib.search(question) == []  # words alone: nothing
    with Library(folder, embedder=ConceptEmbedder()) as lib:
        lib.update()
        hits = lib.search(question, top=1)
        assert [h.path for h in hits] == ["garage.txt"]
        assert hits[0].fused and hits[0].cosine is not None and hits[0].cosine > 0.7  # car = automobile; tyres apart
        assert hits[0].score == pytest.approx(1 / (RRF_K + 1), abs=1e-6)  # first of one ranking, in no other


def test_reciprocal_rank_fusion_orders_by_both_rankings(tmp_path):
    """Each passage scores 1/(k + rank) summed over BM25's ranking and the vectors' (k = 60):
    a passage the words rank first but the meaning ranks last falls below one both rank well."""
    from engine.library.vectors import passage_text

    files = {
        "a-words.txt": "Invoice invoice invoice paid paid. River water, river water, river water, river water.",
        "b-both.txt": "The invoice was paid.",
        "c-meaning.txt": "The bill was paid.",  # no word of the question's but 'paid'
        "d-other.txt": "A banana is a yellow fruit, and the invoice is elsewhere.",
        **{f"filler-{i}.txt": f"A yellow banana number {i} by the river." for i in range(6)},  # the words' idf
    }
    folder = _folder(tmp_path, files)
    question = "invoice paid"
    emb = ConceptEmbedder()
    with Library(folder, embedder=emb) as lib:
        lib.update()
        hits = lib.search(question, top=4)
        db = sqlite3.connect(lib.index)
        try:
            bm25 = [h.path for h in search(db, question, 50)]
            rows = db.execute("SELECT id, path, unit, anchor, text FROM passages").fetchall()
        finally:
            db.close()
    q = emb.embed([question], query=True)[0]
    cos = {r[1]: float(emb.embed([passage_text(*r[1:])])[0] @ q) for r in rows}
    ids = {r[1]: r[0] for r in rows}
    near = sorted(cos, key=lambda p: (-cos[p], ids[p]))
    want = {p: (1 / (RRF_K + bm25.index(p) + 1) if p in bm25 else 0) + 1 / (RRF_K + near.index(p) + 1) for p in files}
    assert [h.path for h in hits] == sorted(want, key=lambda p: (-want[p], ids[p]))[:4]
    for h in hits:
        assert h.fused and h.score == pytest.approx(want[h.path], abs=1e-6)
        assert h.cosine == pytest.approx(cos[h.path], abs=1e-4)
    # the words' first is far in meaning: the passage both rank well goes first
    assert bm25[0] == "a-words.txt" and near.index("a-words.txt") >= 2 and hits[0].path == "b-both.txt"
    assert "c-meaning.txt" in [h.path for h in hits]  # found by meaning alone (one word shared)
    assert emb.queries[0] == question


def test_without_a_model_ranking_is_bm25_as_before(tmp_path):
    folder = _folder(tmp_path, FILES)
    with Library(folder) as lib:
        report = lib.update()
        hits = lib.search("automobile tyres")
    assert (report.embedded, report.vectors) == (0, 0)
    assert [h.path for h in hits] == ["garage.txt"]
    assert not hits[0].fused and hits[0].cosine is None and hits[0].score > 0  # BM25's own score
    from engine.library import source_entry, sources_lines

    assert "cosine" not in source_entry(1, hits[0]) and "(score " in sources_lines(hits)[0]


def test_a_cancel_keeps_what_was_embedded_and_the_next_update_embeds_the_rest(tmp_path):
    folder = _folder(tmp_path, {f"note-{i:02d}.txt": f"Note {i} about a river and its water." for i in range(40)})
    emb = ConceptEmbedder()
    with Library(folder, embedder=emb) as lib:
        report = lib.update(cancelled=lambda: len(emb.texts) >= 20)
        # cut inside a batch: the batches done are kept, the cut one is not
        assert report.cancelled and report.files == 40 and 0 < report.embedded < 20
        assert report.embedded % vectors.BATCH == 0 and report.vectors == report.embedded
        kept = set(emb.texts[:report.embedded])
        emb.texts.clear()
        rest = lib.update()
        assert not rest.cancelled and rest.embedded == 40 - report.embedded and rest.vectors == 40
        assert not kept & set(emb.texts)  # what was kept is not embedded again


# -- through llama.cpp -------------------------------------------------------------------------
def test_the_tiny_bert_embeds_the_library_through_llama_cpp(tmp_path, tiny_bert):
    from engine.llamacpp.text_embedder import library_embedder

    folder = _folder(tmp_path, FILES)
    emb = library_embedder(str(tiny_bert), n_threads=1)
    try:
        assert emb is not None and emb.dims == 32 and emb.name.startswith("tiny-bert.gguf ")
        one, again = emb.embed(["the value of the item"]), emb.embed(["the value of the item"])
        np.testing.assert_array_equal(one, again)
        assert abs(float(np.linalg.norm(one[0])) - 1.0) < 1e-5
        with Library(folder, embedder=emb) as lib:
            report = lib.update()
            assert (report.embedded, report.vectors) == (3, 3)
            assert all(len(v) == 4 * 32 for v in _vectors(lib).values())
            hits = lib.search("automobile tyres", top=3)
            assert hits and all(h.fused for h in hits) and hits[0].path == "garage.txt"  # both rankings agree
            assert all(h.cosine is not None for h in hits)
            assert lib.update().embedded == 0
    finally:
        emb.close()
    # another model file at the same path (other weights): every vector is made again
    from engine.models.tiny_bert import write_bert_model

    other = write_bert_model(tmp_path / "bert" / "tiny-bert.gguf", seed=1)
    emb = library_embedder(str(other), n_threads=1)
    try:
        with Library(folder, embedder=emb) as lib:
            assert lib.update().embedded == 3
    finally:
        emb.close()


def test_an_embedding_model_that_cannot_embed_is_one_line(tmp_path, tiny_target):
    from engine.llamacpp.text_embedder import library_embedder

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a model")
    with pytest.raises(ModelFileError) as e:
        library_embedder(str(bad))
    assert "broken.gguf" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(TandemError, match="no such file"):
        library_embedder(str(tmp_path / "missing.gguf"))
    assert library_embedder("none") is None and library_embedder("off") is None


def test_a_reranker_is_refused_in_one_line(tmp_path, vocab):
    """An encoder whose pooling is not one vector per text (a reranker's RANK) cannot embed."""
    import gguf

    from engine.llamacpp.text_embedder import TextEmbedder
    from engine.models import tiny_bert

    path = tmp_path / "reranker.gguf"
    real = gguf.GGUFWriter.add_pooling_type
    try:
        gguf.GGUFWriter.add_pooling_type = lambda self, _t: real(self, gguf.PoolingType.RANK)
        tiny_bert.write_bert_model(path, vocab=vocab)
    finally:
        gguf.GGUFWriter.add_pooling_type = real
    with pytest.raises(EmbeddingsUnsupported) as e:
        TextEmbedder(path)
    assert str(e.value).startswith("reranker.gguf cannot embed the Library's passages: ") and "\n" not in str(e.value)
