"""llama.cpp's grammar sampler, for the sampling wing.

`GrammarSampler` owns one llama.cpp grammar sampler (GBNF, root rule `root`) for a model's
vocabulary: it crosses out the tokens the grammar forbids in an array of token data (`TOKEN_DATA`)
and advances by the tokens accepted. `parse_error` says why llama.cpp refuses a GBNF text (None when
it parses). What the grammar means for exact sampling is decided above, in
engine.decoding.sampling.grammar; JSON schemas become GBNF in schema_grammar.py.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import threading
from typing import Any

import numpy as np

from .llama import Model, ensure_backend, log_mark, log_since

import llama_cpp  # noqa: E402  (after our imports, as in llama.py)

_lc = llama_cpp.llama_cpp
ROOT = b"root"
TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # llama_token_data
assert TOKEN_DATA.itemsize == ctypes.sizeof(_lc.llama_token_data)
_stderr_lock = threading.Lock()


def parse_error(text: str) -> str | None:
    """None when llama.cpp parses the GBNF `text` (no vocabulary needed); else its reason."""
    ensure_backend()
    smpl = _lc.llama_sampler_init_grammar(None, text.encode("utf-8"), ROOT)
    if smpl:
        _lc.llama_sampler_free(smpl)
        return None
    return _reason(text)


def _reason(text: str) -> str:
    """llama.cpp's reason (its parser writes to stderr, its loader to the log): parse again, listening."""
    mark = log_mark()
    with _stderr_lock, tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        try:
            os.dup2(f.fileno(), 2)
            smpl = _lc.llama_sampler_init_grammar(None, text.encode("utf-8"), ROOT)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        if smpl:  # pragma: no cover - parsed the second time: nothing to report
            _lc.llama_sampler_free(smpl)
        f.seek(0)
        printed = f.read().decode("utf-8", "replace")
    for line in printed.splitlines():
        if "error parsing grammar:" in line:
            return line.split("error parsing grammar:", 1)[1].strip()
    logged = [ln.strip() for ln in log_since(mark) if ln.strip() and "failed to parse" not in ln]
    return logged[-1] if logged else "llama.cpp could not parse it"


class GrammarSampler:
    """One llama.cpp grammar sampler over `model`'s vocabulary; `load` gives None when llama.cpp
    cannot load the grammar for it."""

    def __init__(self, smpl: Any):
        self._smpl = smpl

    @classmethod
    def load(cls, model: Model, text: str) -> GrammarSampler | None:
        smpl = _lc.llama_sampler_init_grammar(model._vocab, text.encode("utf-8"), ROOT)
        return cls(smpl) if smpl else None

    def clone(self) -> GrammarSampler:
        return GrammarSampler(_lc.llama_sampler_clone(self._smpl))

    def close(self) -> None:
        if self._smpl:
            _lc.llama_sampler_free(self._smpl)
            self._smpl = None

    def accept(self, token: int) -> None:
        """Advance by `token` (the caller checks first that the grammar allows it: llama.cpp
        aborts the process on a token its grammar forbids)."""
        _lc.llama_sampler_accept(self._smpl, token)

    def apply(self, data: np.ndarray) -> None:
        """Set the logit of each forbidden token in `data` (a TOKEN_DATA array) to -inf, in place."""
        arr = _lc.llama_token_data_array(data.ctypes.data_as(_lc.llama_token_data_p), data.shape[0], -1, False)
        _lc.llama_sampler_apply(self._smpl, ctypes.byref(arr))

