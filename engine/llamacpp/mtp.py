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

One head context may hold a sequence per parallel slot (`MtpHeads`): a llama_batch carries each
row's token, position, sequence id and hidden state, so one decode reads rows of several slots
(as llama-server's MTP draft does, common/speculative.cpp), and the head's hidden states come
back per row in the batch's order. Such a decode is not bit-identical to each sequence alone
(another batch shape, another order of sums: ~1e-6 on a tiny head, as on a plain model).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import DecodeError, ModelLoadError, UnsupportedModelError
from ..models.compat import DRAFT_ONLY
from .context import Context, common_prefix, flash_attn_type
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


@dataclass
class HeadPart:
    """One sequence's rows in an MTP head decode: `tokens` at positions start.. of sequence `seq`,
    each paired with its row of `hidden`; `logits`: the last row's logits are wanted."""

    seq: int
    tokens: list[int]
    start: int
    hidden: np.ndarray
    logits: bool


class MtpHeads(Closing):
    """The MTP head's llama.cpp context, with a sequence per slot (`n_seq`; one for a lone
    decoder): one `decode` carries rows of several sequences, as llama-server drafts its slots'
    MTP heads (common/speculative.cpp). A head inside the target's file keeps its own KV cache,
    a stream per sequence (not unified: each sequence's cells stay in position order, its sums
    in a lone context's order); a separate assistant (`head`) reads the target's on the target's
    sequence ids.

    An assistant's context must have as many sequences as the target's (`n_seq_max`, a stream
    each, not unified): llama.cpp's cache over another (`mem_other`) shares that cache's cell
    lists and sizes them to its own stream count when it is made, clearing them, so it is made
    before the target decodes (the slots' heads bind as their scheduler starts), and a token of
    sequence s attends the target's stream s (llama-server drafts its slots the same way)."""

    def __init__(self, target: Context, head: Any = None, n_seq: int = 1):
        self._ext = _ext()
        model = head if head is not None else target.model
        if head is None and model.n_nextn <= 0:
            raise UnsupportedModelError(mtp_refusal(model) or "no MTP layers")
        if head is not None and (refusal := assistant_refusal(target.model, head)):
            raise UnsupportedModelError(refusal)
        self.on_target_cache = head is not None
        self.n_embd = int(target.model.n_embd)
        self.n_vocab = model.n_vocab
        params = llama_cpp.llama_context_default_params()
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = target._ctx
        # The target's own head keeps a cache of its own, `n_seq` sequences. An assistant reads
        # the target's: its whole context, every sequence, drafting on the target's.
        params.n_ctx = int(llama_cpp.llama_n_ctx(target._ctx)) if head is not None else target.n_ctx * n_seq
        params.n_batch = params.n_ubatch = max(target.n_batch, n_seq)
        params.n_seq_max = int(llama_cpp.llama_n_seq_max(target._ctx)) if head is not None else n_seq
        params.kv_unified = False
        if head is not None:  # made over a target holding tokens, it would clear the target's cells
            mem = llama_cpp.llama_get_memory(target._ctx)
            if any(llama_cpp.llama_memory_seq_pos_max(mem, s) >= 0 for s in range(params.n_seq_max)):
                raise DecodeError(f"{model.path.name} must bind before its target reads anything: "
                                  "llama.cpp clears the target's cache under it")
        params.n_threads = params.n_threads_batch = target.n_threads
        params.no_perf = True
        params.flash_attn_type = flash_attn_type()
        log_tail.clear()
        self._ctx = model.init_context(params)
        if not self._ctx:
            raise ModelLoadError(f"{model.path}: could not create the MTP context ({recent_log_errors() or 'out of memory?'})")
        # Its own hidden state of every row: "masked" (output rows only) would hand back the first
        # row of the batch, not the output one, as the head's graph takes its hidden states before
        # it picks the output rows; unmasked rows come back in the batch's order.
        self._ext.llama_set_embeddings_nextn(self._ctx, True, False)
        self.n_seq = int(params.n_seq_max)
        self.n_batch = int(llama_cpp.llama_n_batch(self._ctx))
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(self.n_batch, self.n_embd, 1)
        # A batch made for embeddings has no token array; the MTP graph reads both.
        self._tok = (llama_cpp.llama_token * self.n_batch)()
        self._batch.token = self._tok
        self._b_embd = np.ctypeslib.as_array(self._batch.embd, shape=(self.n_batch, self.n_embd))
        for i in range(self.n_batch):
            self._batch.n_seq_id[i] = 1
        self.tokens: list[list[int]] = [[] for _ in range(self.n_seq)]  # each own-cache sequence's
        # Per sequence, the head's own hidden state of its last row read: what a drafted token pairs with.
        self.last_h: list[np.ndarray | None] = [None] * self.n_seq

    def decode(self, parts: Sequence[HeadPart]) -> list[np.ndarray | None]:
        """All `parts` in one `llama_decode`; per part its last row's logits (a copy) where wanted."""
        n = sum(len(p.tokens) for p in parts)
        if not 0 < n <= self.n_batch:
            raise DecodeError(f"an MTP head batch of {n} rows (it holds 1 to {self.n_batch})")
        b, i, ends = self._batch, 0, []
        for p in parts:
            for j, t in enumerate(p.tokens):
                self._tok[i + j] = t
                b.pos[i + j] = p.start + j
                b.seq_id[i + j][0] = p.seq
                b.logits[i + j] = 1 if (p.logits and j == len(p.tokens) - 1) else 0
            self._b_embd[i:i + len(p.tokens)] = p.hidden
            i += len(p.tokens)
            ends.append(i - 1)
        b.n_tokens = n
        rc = llama_cpp.llama_decode(self._ctx, b)
        if rc != 0:
            if not self.on_target_cache:
                for p in parts:
                    llama_cpp.llama_memory_seq_rm(self._mem, p.seq, p.start, -1)
            raise DecodeError(f"the MTP head's decode failed with code {rc}")
        out: list[np.ndarray | None] = []
        for p, end in zip(parts, ends):
            if not self.on_target_cache:
                self.tokens[p.seq].extend(int(t) for t in p.tokens)
            ptr = self._ext.llama_get_embeddings_nextn_ith(self._ctx, end)
            if not ptr:
                raise DecodeError("llama.cpp returned no hidden state from the MTP head")
            self.last_h[p.seq] = np.ctypeslib.as_array(ptr, shape=(self.n_embd,)).copy()
            if p.logits:
                row = llama_cpp.llama_get_logits_ith(self._ctx, end)
                out.append(np.ctypeslib.as_array(row, shape=(self.n_vocab,)).copy())
            else:
                out.append(None)
        return out

    def truncate(self, seq: int, n: int) -> None:
        """Drop an own-cache sequence's entries from index `n` on (an assistant keeps none)."""
        if not self.on_target_cache and n < len(self.tokens[seq]):
            llama_cpp.llama_memory_seq_rm(self._mem, seq, n, -1)
            del self.tokens[seq][n:]

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            self._batch.token = ctypes.POINTER(llama_cpp.llama_token)()  # ours: llama.cpp must not free it
            free_context(self._ctx, self._batch)
            self._ctx = None


class MtpContext:
    """One sequence of an MTP head context (`heads`; without one, a context of its own with one
    sequence), positions aligned with the target's, fed `hidden`: the target's hidden states of
    its sequence. `sync` and `extend` decode alone; `begin` and `part` give the rows to decode
    in a batch of several sequences (`MtpHeads.decode`)."""

    def __init__(self, target: Context, hidden: HiddenStates, head: Any = None, *, heads: MtpHeads | None = None):
        self._own = heads is None
        self.heads = heads if heads is not None else MtpHeads(target, head)
        self.hidden = hidden
        self.n_vocab = self.heads.n_vocab
        self.n_batch = self.heads.n_batch
        # The target's sequence where the head has a sequence per slot (or reads the target's
        # cache on its ids); 0 in a head context of its own with one sequence.
        self.seq = int(getattr(target, "seq", 0)) if self.heads.n_seq > 1 else 0
        self._pos = 0  # an assistant's position: every drafted token sits at the last one

    @property
    def shared(self) -> MtpHeads:
        """The head context this sequence decodes in (what the slots' planner batches by)."""
        return self.heads

    @property
    def tokens(self) -> list[int]:
        return self.heads.tokens[self.seq]

    def begin(self, context: Sequence[int]) -> int:
        """Keep what the sequence holds of `context` (never its last token: its logits are
        wanted) and return the index from which `context` is still to be read."""
        last = len(context) - 1
        if self.heads.on_target_cache:  # the target's cache holds the context: only its last token is read
            self._pos = last
            return last
        keep = min(common_prefix(self.tokens, context), last)
        self.truncate(keep)
        return keep

    def part(self, tokens: Sequence[int], *, drafted: bool, logits: bool) -> HeadPart:
        """The rows of `tokens` next on this sequence: a drafted token paired with the head's own
        last hidden state, a context token at p with the target's h_{p-1}."""
        start = self._pos if self.heads.on_target_cache else len(self.tokens)
        if drafted:
            h = self.heads.last_h[self.seq]
            if h is None:
                raise DecodeError("the MTP head drafts on from a row it has not read")
            hid = h[None, :]
        else:
            hid = np.stack([self.hidden.before(p) for p in range(start, start + len(tokens))])
        return HeadPart(self.seq, list(tokens), start, hid, logits)

    def sync(self, context: Sequence[int]) -> np.ndarray:
        """Hold (x_p, h_{p-1}) for every position of `context` (its last token is the one the
        target has not read yet); return the logits row predicting the token after it."""
        rest = list(context[self.begin(context):])
        row = None
        for i in range(0, len(rest), self.n_batch):
            chunk = rest[i:i + self.n_batch]
            row = self.heads.decode([self.part(chunk, drafted=False, logits=i + len(chunk) == len(rest))])[0]
        assert row is not None
        return row

    def extend(self, token: int) -> np.ndarray:
        """Append a drafted token, paired with the head's own last hidden state; its logits row.
        (An assistant reading the target's cache drafts every token at the same position.)"""
        row = self.heads.decode([self.part([token], drafted=True, logits=True)])[0]
        assert row is not None
        return row

    def truncate(self, n: int) -> None:
        self.heads.truncate(self.seq, n)

    def close(self) -> None:
        if self._own:
            self.heads.close()
