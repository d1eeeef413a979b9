"""A target's own multi-token-prediction (MTP) head, run as llama.cpp's MTP context.

Qwen3.5/3.6, GLM-4.5+ and DeepSeek files carry "nextn" layers trained to predict the token
after next from the target's last hidden state. llama.cpp runs them as a second context of
type `LLAMA_CONTEXT_TYPE_MTP` over the same weights, linked to the target's by `ctx_other`.
The hand-over of hidden states lives in llama.cpp's staging header (src/llama-ext.h), which
llama-cpp-python binds in `llama_cpp.llama_cpp_ext` under each ABI's symbol names; this
module is the one place Tandem touches it.

The pairing (llama.cpp's): the MTP context holds, at position p, the token x_p with the
target's hidden state h_{p-1} of the position before (zeros before the first). Its output
at p predicts x_{p+1}; chaining its own hidden state drafts further.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

import numpy as np

from ..errors import DecodeError, ModelLoadError, UnsupportedModelError
from ..models.compat import DRAFT_ONLY
from .context import Context, common_prefix
from .llama import Closing, free_context, log_tail, recent_log_errors

import llama_cpp  # noqa: E402

_EXT_NAMES = ("llama_set_embeddings_nextn", "llama_get_embeddings_nextn", "llama_get_embeddings_nextn_ith")


def _ext() -> Any:
    """llama-cpp-python's bindings of llama-ext.h; UnsupportedModelError in one line without them."""
    try:
        from llama_cpp import llama_cpp_ext as ext
    except (ImportError, AttributeError) as e:  # an older wheel, or a build without the symbols
        raise UnsupportedModelError(f"this llama.cpp build cannot run MTP heads ({e}); reinstall with packaging/bootstrap.sh") from None
    missing = [n for n in _EXT_NAMES if not hasattr(ext, n)]
    if missing:
        raise UnsupportedModelError(f"this llama.cpp build lacks {', '.join(missing)}: it cannot run MTP heads")
    return ext


def mtp_refusal(target: Any) -> str | None:
    """Why `target` (a loaded Model) cannot draft with its own MTP head; None when it can."""
    if getattr(target, "n_nextn", 0) <= 0:
        return (f"{target.path.name} ({target.architecture}) has no MTP layers; MTP drafting needs a file "
                "converted with them (Qwen3.5/3.6, GLM-4.5+, DeepSeek V3 and others ship them)")
    try:
        _ext()
    except UnsupportedModelError as e:
        return str(e)
    return None


class HiddenStates:
    """The target context's hidden state per position, recorded after each of its decodes
    (llama.cpp keeps only the last batch's), so the MTP head can catch up later. `target` may be
    one sequence of a shared context (a `SequenceView`): its rows are read where they stood in
    the pass (llama.cpp hands every row back in the batch's order)."""

    def __init__(self, target: Context):
        self._ext = _ext()
        self._target = target
        self.n_embd = int(target.model.n_embd)
        self._ext.llama_set_embeddings_nextn(target._ctx, True, False)  # every row, not only outputs
        self.rows = np.zeros((max(16, min(target.n_ctx, 1024)), self.n_embd), dtype=np.float32)
        target.after_decode = self.record

    def record(self, start: int, n: int, row: int = 0) -> None:
        """Keep the hidden states of positions start.. start+n, rows row.. of the last decode."""
        ptr = self._ext.llama_get_embeddings_nextn(self._target._ctx)
        if not ptr:
            raise DecodeError("llama.cpp returned no hidden states for the MTP head")
        if start + n > len(self.rows):  # grow by doubling, up to the context
            grown = np.zeros((min(self._target.n_ctx, max(2 * len(self.rows), start + n)), self.n_embd), np.float32)
            grown[: len(self.rows)] = self.rows
            self.rows = grown
        self.rows[start:start + n] = np.ctypeslib.as_array(ptr, shape=(row + n, self.n_embd))[row:]

    def before(self, p: int) -> np.ndarray:
        """h_{p-1}: the hidden state the MTP head pairs with the token at position p."""
        return self.rows[p - 1] if p > 0 else np.zeros(self.n_embd, dtype=np.float32)

    def close(self) -> None:
        if getattr(self._target, "_ctx", None):
            self._ext.llama_set_embeddings_nextn(self._target._ctx, False, False)
        self._target.after_decode = None


# Drafter architectures that are a separate file reading the target's own KV cache (their
# layers have queries only): they keep no cache, and every drafted token sits at one position.
SHARED_CACHE_DRAFTERS = {arch: target for arch, (target, _) in DRAFT_ONLY.items()}


def assistant_refusal(target: Any, head: Any) -> str | None:
    """Why `head` (a loaded drafter model like Gemma 4's assistant) cannot draft for `target`."""
    want = SHARED_CACHE_DRAFTERS.get(head.architecture)
    if want is None:
        return f"{head.path.name} ({head.architecture}) is not an MTP drafter model"
    if target.architecture != want:
        return f"{head.path.name} drafts for {want} models, not {target.path.name} ({target.architecture})"
    width = head.header.arch_value("embedding_length_out")
    if width != target.header.arch_value("embedding_length"):
        return (f"{head.path.name} reads hidden states {width} wide; {target.path.name}'s are "
                f"{target.header.arch_value('embedding_length')} (another size of the family)")
    return None


class MtpContext(Closing):
    """The MTP head's context, positions aligned with the target's. A head inside the target's
    file keeps its own KV cache; a separate assistant (`head`) reads the target's, on the
    target's sequence (a `SequenceView`'s `seq`; 0 for a lone context).

    An assistant's context must have as many sequences as the target's (`n_seq_max`, a stream
    each, not unified): llama.cpp's cache over another (`mem_other`) shares that cache's cell
    lists and sizes them to its own stream count when it is made, clearing them, so it is made
    before the target decodes (a slot's drafter binds as its scheduler starts), and a token of
    sequence s attends the target's stream s (llama-server drafts its slots the same way)."""

    def __init__(self, target: Context, hidden: HiddenStates, head: Any = None):
        self._ext = _ext()
        model = head if head is not None else target.model
        if head is None and model.n_nextn <= 0:
            raise UnsupportedModelError(mtp_refusal(model) or "no MTP layers")
        if head is not None and (refusal := assistant_refusal(target.model, head)):
            raise UnsupportedModelError(refusal)
        self.shared = head is not None
        self.hidden = hidden
        self.n_embd = hidden.n_embd
        self.n_vocab = model.n_vocab
        self._pos = 0
        params = llama_cpp.llama_context_default_params()
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = target._ctx
        # The target's own head keeps a cache of its own: one sequence, 0. An assistant reads
        # the target's: its whole context, every sequence, drafting on the target's.
        self.seq = int(getattr(target, "seq", 0)) if self.shared else 0
        params.n_ctx = int(llama_cpp.llama_n_ctx(target._ctx)) if self.shared else target.n_ctx
        params.n_batch = params.n_ubatch = target.n_batch
        params.n_seq_max = int(llama_cpp.llama_n_seq_max(target._ctx)) if self.shared else 1
        params.kv_unified = False
        if self.shared:  # made over a target holding tokens, it would clear the target's cells
            mem = llama_cpp.llama_get_memory(target._ctx)
            if any(llama_cpp.llama_memory_seq_pos_max(mem, s) >= 0 for s in range(params.n_seq_max)):
                raise DecodeError(f"{model.path.name} must bind before its target reads anything: "
                                  "llama.cpp clears the target's cache under it")
        params.n_threads = params.n_threads_batch = target.n_threads
        params.no_perf = True
        log_tail.clear()
        self._ctx = model.init_context(params)
        if not self._ctx:
            raise ModelLoadError(f"{model.path}: could not create the MTP context ({recent_log_errors() or 'out of memory?'})")
        # Its own hidden state of every row: "masked" (output rows only) would hand back the first
        # row of the batch, not the output one, as the head's graph takes its hidden states before
        # it picks the output rows; a catch-up batch's last row is the one `extend` chains from.
        self._ext.llama_set_embeddings_nextn(self._ctx, True, False)
        self._last_rows = 0  # rows of the last decode: its last holds the hidden state `extend` pairs
        self.n_batch = int(llama_cpp.llama_n_batch(self._ctx))
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(self.n_batch, self.n_embd, 1)
        # A batch made for embeddings has no token array; the MTP graph reads both.
        self._tok = (llama_cpp.llama_token * self.n_batch)()
        self._batch.token = self._tok
        self._b_embd = np.ctypeslib.as_array(self._batch.embd, shape=(self.n_batch, self.n_embd))
        for i in range(self.n_batch):
            self._batch.n_seq_id[i] = 1
            self._batch.seq_id[i][0] = self.seq
        self.tokens: list[int] = []

    def sync(self, context: Sequence[int]) -> np.ndarray:
        """Hold (x_p, h_{p-1}) for every position of `context` (its last token is the one the
        target has not read yet); return the logits row predicting the token after it."""
        last = len(context) - 1
        if self.shared:  # the target's cache holds the context: only its last token is read
            self._pos = last
            return self._decode([context[last]], self.hidden.before(last)[None, :], last, keep=False)
        keep = min(common_prefix(self.tokens, context), last)
        self.truncate(keep)
        row = None
        for start in range(keep, len(context), self.n_batch):
            chunk = list(context[start:start + self.n_batch])
            hid = np.stack([self.hidden.before(p) for p in range(start, start + len(chunk))])
            row = self._decode(chunk, hid, start, keep=start + len(chunk) < len(context))
        assert row is not None
        return row

    def extend(self, token: int) -> np.ndarray:
        """Append a drafted token, paired with the head's own last hidden state; its logits row.
        (An assistant reading the target's cache drafts every token at the same position.)"""
        ptr = self._ext.llama_get_embeddings_nextn_ith(self._ctx, self._last_rows - 1)  # the last row read
        if not ptr:
            raise DecodeError("llama.cpp returned no hidden state from the MTP head")
        h = np.ctypeslib.as_array(ptr, shape=(self.n_embd,)).copy()
        pos = self._pos if self.shared else len(self.tokens)
        return self._decode([token], h[None, :], pos, keep=False)

    def _decode(self, tokens: list[int], hidden: np.ndarray, start: int, *, keep: bool) -> np.ndarray:
        """Decode at positions start.. ; `keep`: a catch-up chunk (no logits wanted)."""
        n = len(tokens)
        b = self._batch
        for i, t in enumerate(tokens):
            self._tok[i] = t
            b.pos[i] = start + i
            b.logits[i] = 0 if (keep or i < n - 1) else 1
        self._b_embd[:n] = hidden
        b.n_tokens = n
        rc = llama_cpp.llama_decode(self._ctx, b)
        if rc != 0:
            if not self.shared:
                llama_cpp.llama_memory_seq_rm(self._mem, 0, start, -1)
            raise DecodeError(f"the MTP head's decode failed with code {rc}")
        if not self.shared:
            self.tokens.extend(int(t) for t in tokens)
        self._last_rows = n
        if keep:
            return np.empty(0, dtype=np.float32)
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def truncate(self, n: int) -> None:
        if not self.shared and n < len(self.tokens):
            llama_cpp.llama_memory_seq_rm(self._mem, 0, n, -1)
            del self.tokens[n:]

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            self._batch.token = ctypes.POINTER(llama_cpp.llama_token)()  # ours: llama.cpp must not free it
            free_context(self._ctx, self._batch)
            self._ctx = None

