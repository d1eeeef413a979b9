"""GGUF header reading, bad files, and the draft/target compatibility rules."""

from __future__ import annotations

import shutil

import pytest

from engine.models.compat import VocabInfo, check_pair, check_shared, check_vocabs, require_compatible
from engine.errors import IncompatiblePairError, ModelFileError, ModelLoadError
from engine.models.gguf_header import read_header, validate_file
from engine.llamacpp.llama import Model


def test_header_reads_metadata_and_tensors(tiny_target):
    h = read_header(tiny_target)
    assert h.architecture == "llama"
    assert h.get("general.name") == "tiny-target"
    assert len(h.get("tokenizer.ggml.tokens")) > 300
    assert any(t.name == "token_embd.weight" for t in h.tensors)
    assert h.expected_file_size == tiny_target.stat().st_size


def test_scalars_only_read_steps_over_arrays_and_still_checks_them(tiny_target, tmp_path):
    """The app reads a model's context length and shape on its GUI thread: without the
    tokenizer's arrays (most of a header), and a cut inside them is still an error."""
    from engine.models.gguf_header import SkippedArray

    full = read_header(tiny_target, with_tensors=False)
    quick = read_header(tiny_target, with_tensors=False, arrays=False)
    for k, v in full.metadata.items():
        if isinstance(v, list):
            assert quick.metadata[k] == SkippedArray(len(v)) and len(quick.metadata[k]) == len(v)
        else:
            assert quick.metadata[k] == v
    assert quick.architecture == full.architecture
    cut = tmp_path / "cut.gguf"
    data = tiny_target.read_bytes()
    tokens_at = data.index(b"tokenizer.ggml.tokens")
    cut.write_bytes(data[: tokens_at + 400])  # ends inside the token strings
    with pytest.raises(ModelFileError, match="ends inside the GGUF header"):
        read_header(cut, with_tensors=False, arrays=False)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: None, "no such file"),
        (lambda p: p.write_bytes(b""), "file is empty"),
        (lambda p: p.write_bytes(b"PK\x03\x04 this is a zip, not a model"), "not a GGUF file"),
        (lambda p: p.mkdir(), "is a directory"),
    ],
)
def test_bad_files_get_specific_errors(tmp_path, make, message):
    p = tmp_path / "bad.gguf"
    make(p)
    with pytest.raises(ModelFileError, match=message) as e:
        validate_file(p)
    assert str(p) in str(e.value)


def test_truncated_file_is_diagnosed_before_llama_cpp(tmp_path, tiny_target):
    data = tiny_target.read_bytes()
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[: len(data) - 1000])
    with pytest.raises(ModelFileError, match="truncated GGUF.*1,000 missing"):
        validate_file(p)
    with pytest.raises(ModelFileError, match="truncated"):
        Model(p)
    p.write_bytes(data[:2000])  # cut inside the header
    with pytest.raises(ModelFileError, match="ends inside the GGUF header"):
        Model(p)


def test_corrupt_tensor_data_fails_cleanly_in_llama_cpp(tmp_path, tiny_target):
    """Header fine, tensor table pointing past the end: llama.cpp refuses, we name the file."""
    h = read_header(tiny_target)
    data = bytearray(tiny_target.read_bytes())
    # Break the architecture string so llama.cpp cannot build the model.
    i = data.find(b"llama", 0, h.data_offset)
    data[i : i + 5] = b"xxxxx"
    p = tmp_path / "badarch.gguf"
    p.write_bytes(bytes(data))
    with pytest.raises((ModelLoadError, ModelFileError)) as e:
        Model(p)
    assert "badarch.gguf" in str(e.value)


def test_same_vocab_is_compatible(tiny_target, tiny_draft):
    v = check_pair(tiny_target, tiny_draft)
    assert v.compatible and v.reasons == []
    require_compatible(tiny_target, tiny_draft)


def test_different_vocab_is_bridged_with_reason(tiny_target, other_vocab_model):
    v = check_pair(tiny_target, other_vocab_model)
    assert v.compatible and v.bridged
    assert any("token 300 differs" in n for n in v.notes)
    assert require_compatible(tiny_target, other_vocab_model).bridged


def test_unbridgeable_vocab_is_incompatible_with_reason(tiny_target, no_byte_fallback):
    v = check_pair(tiny_target, no_byte_fallback)
    assert not v.compatible
    assert any("no byte fallback" in r for r in v.reasons)
    with pytest.raises(IncompatiblePairError) as e:
        require_compatible(tiny_target, no_byte_fallback)
    assert e.value.reasons == v.reasons


def _vocab(**kw):
    base = dict(source="x", model="gpt2", tokens=[f"t{i}" for i in range(1000)], bos=1, eos=2, add_bos=False, add_eos=False)
    base.update(kw)
    return VocabInfo(**base)


def test_llama_cpp_rules_one_by_one():
    t = _vocab()
    assert check_shared(t, _vocab())
    assert "tokenizer types differ" in check_shared(t, _vocab(model="llama")).summary()
    assert "add-BOS differs" in check_shared(t, _vocab(add_bos=True)).summary()
    assert "BOS token differs" in check_shared(t, _vocab(bos=7)).summary()
    assert "EOS token differs" in check_shared(t, _vocab(eos=9)).summary()
    # sizes: within 128 is fine (a note), beyond is not
    ok = check_shared(t, _vocab(tokens=t.tokens + [f"x{i}" for i in range(128)]))
    assert ok.compatible and ok.notes
    bad = check_shared(t, _vocab(tokens=t.tokens + [f"x{i}" for i in range(129)]))
    assert "differ by 129" in bad.summary()
    # token texts: ids below 5 may differ, from 5 on they may not
    low = list(t.tokens)
    low[3] = "other"
    assert check_shared(t, _vocab(tokens=low))
    high = list(t.tokens)
    high[5] = "other"
    assert "token 5 differs" in check_shared(t, _vocab(tokens=high)).summary()
    # a pair that fails them is bridged through text (byte-level BPE spells any text), the
    # first failed rule named
    bridged = check_vocabs(t, _vocab(tokens=high))
    assert bridged.bridged and "token 5 differs" in bridged.summary()


def test_real_cross_family_pair_is_bridged():
    from conftest import real_model

    smol = real_model("smollm2-135m-instruct-q4_1")
    qwen = real_model("qwen2.5-coder-0.5b-instruct-q4_k_m")
    if smol is None or qwen is None:
        pytest.skip("needs SmolLM2 and Qwen in the store")
    v = check_pair(qwen, smol)
    assert v.bridged
    assert "vocabulary sizes differ" in v.summary()


def test_copy_of_model_is_compatible_with_itself(tmp_path, tiny_target):
    p = tmp_path / "copy.gguf"
    shutil.copy(tiny_target, p)
    assert check_pair(tiny_target, p).compatible


def test_a_pairs_verdict_is_kept_by_the_files_contents_and_refusals_are_not(tiny_target, tiny_draft, other_vocab_model,
                                                                              no_byte_fallback, monkeypatch):
    """`kept_verdict`: the second process with the same pair reads no vocabulary (the verdict is in
    the calibration store under both files' content ids); a bridged pair stays bridged; a refused
    pair is refused each time, never kept."""
    from engine.models import compat

    first = compat.kept_verdict(tiny_target, tiny_draft)
    bridged = compat.kept_verdict(tiny_target, other_vocab_model)
    monkeypatch.setattr(compat, "require_compatible", lambda *a: pytest.fail("the vocabularies were read again"))
    again = compat.kept_verdict(tiny_target, tiny_draft)
    assert again.compatible and not again.bridged and again.mode == first.mode
    assert compat.kept_verdict(tiny_target, other_vocab_model).bridged and bridged.bridged
    monkeypatch.undo()
    for _ in range(2):
        with pytest.raises(IncompatiblePairError):
            compat.kept_verdict(tiny_target, no_byte_fallback)


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_header_reads_the_same_whatever_the_read_size(tiny_target, tmp_path, chunk):
    """The reader takes its stream `chunk` bytes at a time (a vocabulary is 300,000 small reads):
    every refill boundary, inside a length or a string, gives gguf's own reading, and a cut at
    any byte of the token strings is the one error, never a struct or index error."""
    import io

    import gguf

    from engine.models.gguf_header import read_header_stream

    data = tiny_target.read_bytes()
    theirs = gguf.GGUFReader(tiny_target)
    mine = read_header_stream(io.BytesIO(data).read, "t.gguf", chunk=chunk)
    tokens = theirs.fields["tokenizer.ggml.tokens"]
    assert mine.get("tokenizer.ggml.tokens") == [bytes(tokens.parts[i]).decode() for i in tokens.data]
    assert [t.name for t in mine.tensors] == [t.name for t in theirs.tensors]
    assert mine.data_offset == theirs.data_offset
    at = data.index(b"tokenizer.ggml.tokens")
    for cut in range(at + 40, at + 120, 3):
        for arrays in (True, False):
            with pytest.raises(ModelFileError, match="ends inside the GGUF header"):
                read_header_stream(io.BytesIO(data[:cut]).read, "t.gguf", arrays=arrays, chunk=chunk)
