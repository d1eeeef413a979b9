"""Shared fixtures: tiny generated GGUF models, isolated user dirs, the real models if present."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
if os.environ["QT_QPA_PLATFORM"] == "offscreen":
    # A 1920x1080 screen instead of the plugin's 800x800 (tests/offscreen_screen.py), for this
    # process and the children it starts; set before a QApplication exists.
    from offscreen_screen import platform

    os.environ["QT_QPA_PLATFORM"] = platform()
# llama.cpp's OpenMP threads spin while they wait for each other: right for the app (docs/
# benchmarks.md), ruinous for a test suite sharing a busy machine, where a spinning thread
# waits for a core another process holds (a tiny model's decode went from 0.3 ms to 14-49 ms
# at load 10 on 2 cores). Tests check results, never speed: their threads sleep instead.
# Set before llama.cpp (and its libgomp) loads; subprocesses (CLI, server) inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# A home of this test process's own, for what runs before a test's own home is set below:
# module- and session-scoped fixtures are made first, and with no TANDEM_HOME they wrote the
# user's real folders (draft history, prompt cache), shared with every other worker and run:
# a bench test read another process's answers there. Subprocesses inherit it.
_PROCESS_HOME = tempfile.mkdtemp(prefix="tandem-tests-")
os.environ["TANDEM_HOME"] = _PROCESS_HOME
os.environ["TANDEM_METRICS_LOG"] = os.path.join(_PROCESS_HOME, "metrics.jsonl")
atexit.register(shutil.rmtree, _PROCESS_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Never write metrics, history or settings into the real user's folders."""
    home = tmp_path_factory.mktemp("tandem_home")
    monkeypatch.setenv("TANDEM_HOME", str(home))
    monkeypatch.setenv("TANDEM_METRICS_LOG", str(home / "metrics.jsonl"))
    yield
    # Collect this test's Python-owned windows now, while no generation thread emits signals.
    # Collected later, in the middle of the next test's answer, a window's destructor took a Qt
    # signal mutex (a pool shared by address) in the GUI thread, holding the GIL, while the
    # worker held that mutex waiting for the GIL: CI hung (gdb: QMenu::~QMenu vs take_gil).
    import gc
    import sys

    gc.collect()
    if "PySide6.QtWidgets" in sys.modules:
        from PySide6.QtCore import QCoreApplication, QEvent

        if QCoreApplication.instance() is not None:
            QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    if "PySide6.QtGui" in sys.modules:  # Copy answer's QMimeData, left on the clipboard, segfaulted the exit
        from PySide6.QtGui import QGuiApplication

        if QGuiApplication.instance() is not None:
            QGuiApplication.clipboard().clear()


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny_models")


@pytest.fixture(scope="session")
def vocab():
    from engine.models.tinymodel import make_vocab

    return make_vocab()


@pytest.fixture(scope="session")
def tiny_bert(models_dir, vocab) -> Path:
    """The tiny BERT encoder (mean pooling, 32 dimensions, the tiny models' vocabulary) that ranks a
    Library by meaning in the tests, written once; read, never changed."""
    from engine.models.tiny_bert import write_bert_model

    return write_bert_model(models_dir / "tiny-bert.gguf", vocab=vocab)


@pytest.fixture(scope="session")
def tiny_target(models_dir, vocab) -> Path:
    from engine.models.tinymodel import write_model

    return write_model(models_dir / "target.gguf", seed=1, n_layer=2, name="tiny-target", vocab=vocab)


@pytest.fixture(scope="session")
def tiny_draft(models_dir, vocab) -> Path:
    """Same tokenizer, different weights: disagrees with the target often."""
    from engine.models.tinymodel import write_model

    return write_model(models_dir / "draft.gguf", seed=2, n_layer=1, name="tiny-draft", vocab=vocab)


@pytest.fixture(scope="session")
def other_vocab_model(models_dir) -> Path:
    """A model whose vocabulary differs from the tiny target's (a pair bridged through text)."""
    from engine.models.tinymodel import make_vocab, write_model

    v = make_vocab(extra_words=10)
    v.tokens[300], v.tokens[301] = v.tokens[301], v.tokens[300]
    return write_model(models_dir / "other.gguf", seed=3, vocab=v, name="other-vocab")


@pytest.fixture(scope="session")
def no_byte_fallback(models_dir, vocab) -> Path:
    """A SentencePiece vocabulary without byte tokens: it cannot spell every text, so it
    cannot draft for another vocabulary through text (a refused pair)."""
    from engine.models.tinymodel import NORMAL, Vocab, write_model

    toks = [t if not t.startswith("<0x") else f"<b{i}>" for i, t in enumerate(vocab.tokens)]
    types = [NORMAL if t.startswith("<b") else ty for t, ty in zip(toks, vocab.types)]
    return write_model(models_dir / "nobytes.gguf", vocab=Vocab(toks, vocab.scores, types), chain={}, name="nobytes")


def real_model(name: str) -> Path | None:
    """A real GGUF from the store, if it has been fetched (CI fetches SmolLM2)."""
    try:
        from engine.models import store

        return store.find_model(name)
    except Exception:
        return None


def require_real(name: str) -> Path:
    path = real_model(name)
    if path is None:
        if os.environ.get("TANDEM_REQUIRE_REAL"):
            pytest.fail(f"real model {name} is required (TANDEM_REQUIRE_REAL) but not in the store")
        pytest.skip(f"real model {name} not in the store (run: tandem pull {name} --source mirror)")
    return path


@pytest.fixture(scope="session")
def tiny_hybrid(models_dir, vocab) -> Path:
    """A hybrid Qwen3.5 (gated delta net + attention) with one MTP layer."""
    from engine.models.tiny_archs import write_arch_model

    return write_arch_model(models_dir / "qwen35-mtp.gguf", "qwen35", mtp=True, seed=0, vocab=vocab)


@pytest.fixture(scope="session")
def tiny_vision(models_dir, vocab) -> tuple[Path, Path]:
    """(target, projector): the hybrid Qwen3.5 with its MTP layer, and a random qwen3vl
    projector for it, in a folder of their own (the projector is found beside its target)."""
    from engine.models.tiny_archs import write_arch_model
    from engine.models.tiny_projector import write_projector

    folder = models_dir / "vision"
    target = write_arch_model(folder / "qwen35-vl-mtp.gguf", "qwen35", mtp=True, seed=0, vocab=vocab)
    return target, write_projector(folder / "mmproj-qwen35-vl.gguf")


@pytest.fixture(scope="session")
def tiny_vision_llama(models_dir, vocab) -> tuple[Path, Path]:
    """(target, projector): an attention-only llama that sees (a random qwen3vl projector read at
    plain positions), in a folder of its own: the seeing target the parallel slots can run."""
    from engine.models.tiny_projector import write_projector
    from engine.models.tinymodel import write_model

    folder = models_dir / "vision-llama"
    target = write_model(folder / "llama-vl.gguf", seed=1, n_layer=2, name="tiny-vl-llama", vocab=vocab)
    return target, write_projector(folder / "mmproj-llama-vl.gguf")


@pytest.fixture(scope="session")
def tiny_vision_qwen3vl(models_dir, vocab) -> tuple[Path, Path]:
    """(target, projector): Qwen3-VL's attention-only text model that reads pictures at M-RoPE
    positions (fewer than their cells), and a random qwen3vl projector for it."""
    from engine.models.tiny_archs import write_arch_model
    from engine.models.tiny_projector import write_projector

    folder = models_dir / "vision-qwen3vl"
    target = write_arch_model(folder / "qwen3vl.gguf", "qwen3vl", seed=0, vocab=vocab)
    return target, write_projector(folder / "mmproj-qwen3vl.gguf")


@pytest.fixture(scope="session")
def tiny_vision_gemma4(models_dir, vocab) -> tuple[Path, Path, Path]:
    """(target, projector, assistant): the tiny Gemma 4, a random gemma4v projector, and the
    assistant that drafts from the target's own cache."""
    from engine.models.tiny_archs import write_arch_model
    from engine.models.tiny_projector import write_projector

    folder = models_dir / "vision-gemma4"
    target = write_arch_model(folder / "gemma4-vl.gguf", "gemma4", seed=0, vocab=vocab)
    assistant = write_arch_model(folder / "gemma4-vl-assistant.gguf", "gemma4-assistant", seed=1, vocab=vocab)
    return target, write_projector(folder / "mmproj-gemma4-vl.gguf", kind="gemma4"), assistant


@pytest.fixture(scope="session")
def tiny_hybrid_draft(models_dir, vocab) -> Path:
    """A smaller-family Qwen3.5 of the same vocabulary: other weights, no MTP layer."""
    from engine.models.tiny_archs import write_arch_model

    return write_arch_model(models_dir / "qwen35-draft.gguf", "qwen35", seed=7, vocab=vocab)


@pytest.fixture(scope="session")
def tiny_lfm2(models_dir, vocab) -> Path:
    from engine.models.tiny_archs import write_arch_model

    return write_arch_model(models_dir / "lfm2.gguf", "lfm2", seed=0, vocab=vocab)


@pytest.fixture(scope="session")
def tiny_lfm2_draft(models_dir, vocab) -> Path:
    from engine.models.tiny_archs import write_arch_model

    return write_arch_model(models_dir / "lfm2-draft.gguf", "lfm2", seed=3, vocab=vocab)


@pytest.fixture(scope="session")
def tiny_gemma4(models_dir, vocab) -> Path:
    """A Gemma 4 target (sliding-window layers, the last one full attention)."""
    from engine.models.tiny_archs import write_arch_model

    return write_arch_model(models_dir / "gemma4.gguf", "gemma4", seed=0, vocab=vocab)


@pytest.fixture(scope="session")
def tiny_gemma4_assistant(models_dir, vocab) -> Path:
    """Its assistant drafter: query-only layers reading the target's KV cache."""
    from engine.models.tiny_archs import write_arch_model

    return write_arch_model(models_dir / "gemma4-assistant.gguf", "gemma4-assistant", seed=1, vocab=vocab)
