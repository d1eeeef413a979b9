"""Long prompts read through the target's weights as the file has them, the answer written by
the repacked ones.

On a CPU llama.cpp copies a model's quantised weights into interleaved layouts at load
("repacking", its default) that make a pass over a few tokens fast: one token, a verify pass
of 2-5. On some CPUs the same layouts make a pass over hundreds of tokens slower: on this
project's AVX-512 EPYC VM, Qwen2.5-Coder 1.5B Q4_K_M reads 122 tokens/s repacked and 209 as the
file has them (`llama-bench -p 512 --repack 1,0`), while one token costs 9% more unrepacked
and a 2-token pass 1.7x. A second load of the same file without repacking takes 0.5 s and
almost no memory of its own (its weights are the file's mapped pages), so a long prompt is read
there and its KV state handed to the target's context: each kind of pass at its faster speed.

Whether it is faster is measured, never assumed: the first long prompt reads its first chunk
on the target and its second on the twin, and the verdict is kept in the calibration store by
model content, machine, threads and llama.cpp build. A target with nothing repacked (a GPU,
F16/F32 weights, a CPU without the kernels), a hybrid target (its recurrent state and
snapshots stay with its context) and a prompt with pictures are read as before.

The server's parallel slots read the same way (`plan_seq`, `feed_seq`): the twin is a context of
as many KV streams as theirs (llama.cpp's state bytes name the stream count), read a chunk per
scheduler step between the running slots' passes; their rate on the target comes from the passes
that only read prompts (`observe_target`).

May import: llama (Model), context (Context and its state functions), sequences (SharedContext),
runtime, engine.models.calibration.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Iterator, Sequence

from ..errors import TandemError
from ..models import calibration
from .build import build_id
from .context import Context, keyed
from .llama import Model
from .runtime import RuntimeParams
from .sequences import Part, SharedContext

MODES = ("auto", "always", "never")
FASTER = 1.05  # the twin must read this much faster than the target to be used
TWIN_CONTEXT_S = 0.1  # making the twin's context (0.06 s for a 1.5B's 4k context)
HANDOVER_BYTES_S = 0.4e9  # a state saved and loaded: 42 MB (1,452 tokens of a 1.5B) in 0.09 s


def reading_mode(value: str | None) -> str:
    """The mode asked for (None: $TANDEM_PLAIN_READING, else "auto"); a TandemError naming the
    choices for another."""
    mode = value or os.environ.get("TANDEM_PLAIN_READING") or "auto"
    if mode not in MODES:
        raise TandemError(f"plain reading must be one of {', '.join(MODES)}, not {mode!r}"
                          + ("" if value else " (TANDEM_PLAIN_READING)"))
    return mode


class TwinRefused(Exception):
    """llama.cpp refused a state handed between a slot's sequence and the twin's (never seen: the
    same file, the same KV types). `emptied`: the slot's sequence lost what it held."""

    def __init__(self, emptied: bool):
        super().__init__("a state was refused between the target and its plain twin")
        self.emptied = emptied


class PlainReader:
    """Reads a target context's prompt chunks through an unrepacked twin of its model when that
    is measured faster (`plan`, `feed`). `mode`: "auto" (measure once, then decide per prompt),
    "always" (every prompt of a chunk or more: tests, checks), "never". `keep`: store the
    verdict in the calibration store (False: this process only)."""

    def __init__(self, model: Model, *, mode: str = "auto", keep: bool = True):
        self.mode = reading_mode(mode)
        self.model = model
        self.keep = keep
        self._twin: Model | None = None
        self._loading = threading.Lock()
        self._key = f"plain-read|{calibration.machine_id()}|{calibration.content_id(model.path)}|{build_id()}"
        self.verdict: dict[str, float] | None = None  # tokens/s on each, the twin's load seconds
        self._verdicts: dict[int, dict[str, float]] = {}  # by thread count
        self._partial: dict[int, dict[str, float]] = {}  # rates measured, by thread count, before both are
        self._looked: set[int] = set()  # thread counts whose stored verdict was read

    # -- what to do --------------------------------------------------------------------------
    def plan(self, ctx: Context, total: int, images: Sequence[object] = ()) -> str | None:
        """How `total` prompt tokens after what `ctx` holds are best read: "plain" (on the twin),
        "measure" (first chunk here, second there, the rest on the faster), or None (here)."""
        if self.mode == "never" or images or ctx.recurrent or total < 1 or type(ctx) is not Context:
            return None
        if self.mode == "always":
            return "plain"
        if not self.model.repacked:
            return None
        v = self._verdict(ctx.n_threads)
        if v is None:
            return "measure" if total >= 2 * ctx.n_batch else None
        return "plain" if self._pays(v, total, ctx.n_past, 1) else None

    def _pays(self, v: dict[str, float], total: int, held: int, streams: int) -> bool:
        """Whether `total` tokens read on the twin after `held` save more than the twin costs: its
        load (once), its context, and the state handed there and back."""
        target, plain = v["target_tok_s"], v["plain_tok_s"]
        if plain < target * FASTER:
            return False
        saved = total / target - total / plain
        load = 0.0 if self._twin is not None else v.get("load_s", 1.0)
        handed = (2 * held + total) * _kv_bytes_per_token(self.model) / HANDOVER_BYTES_S
        return saved > load + TWIN_CONTEXT_S * streams + handed

    def _verdict(self, threads: int) -> dict[str, float] | None:
        """The verdict for `threads`: measured here, or read from the store once (not at every
        prompt's plan while none is stored)."""
        if threads not in self._verdicts and threads not in self._looked and self.keep:
            self._looked.add(threads)
            kept = calibration.load(f"{self._key}|t{threads}")
            if kept and all(isinstance(kept.get(k), (int, float)) and kept[k] > 0
                            for k in ("target_tok_s", "plain_tok_s")):
                self._verdicts[threads] = {k: float(v) for k, v in kept.items() if isinstance(v, (int, float))}
        self.verdict = self._verdicts.get(threads)
        return self.verdict

    # -- reading ---------------------------------------------------------------------------
    def feed(self, ctx: Context, tokens: Sequence[int], how: str, *, abortable: bool = True
             ) -> Iterator[tuple[int, None]]:
        """Read `tokens` after what `ctx` holds as `plan` said, yielding (tokens done, None) after
        each chunk as `Context.feed` does; at the end `ctx` holds them all. Cancelled (an abort of
        `ctx`, which stops the twin's decodes too) leaves `ctx` holding what it held before, or
        the first chunk where that was read on it."""
        tokens = list(tokens)
        done = 0
        if how == "measure":
            chunk = tokens[: ctx.n_batch]
            t = time.perf_counter()
            ctx.decode(chunk, logits="none", abortable=abortable)
            target_rate = len(chunk) / (time.perf_counter() - t)
            done = len(chunk)
            yield done, None
        held, start = list(ctx.tokens), done
        twin, load_s = self._twin_model()
        tc = Context(twin, self._runtime(ctx, len(tokens)))
        try:
            tc.stops_with(ctx)
            if ctx.n_past and not _hand(ctx, tc):  # never seen: the same file, the same KV types
                tc.close()
                yield from _here(ctx, tokens, done, abortable)
                return
            if how == "measure":
                chunk = tokens[done : done + ctx.n_batch]
                t = time.perf_counter()
                tc.decode(chunk, logits="none", abortable=abortable)
                plain_rate = len(chunk) / (time.perf_counter() - t)
                done += len(chunk)
                self._record(ctx.n_threads, target_rate, plain_rate, load_s)
                if plain_rate < target_rate * FASTER:  # the rest on the target, as before
                    if not _hand(tc, ctx):
                        _reread(ctx, held + chunk)
                    tc.close()
                    yield done, None
                    yield from _here(ctx, tokens, done, abortable)
                    return
                yield done, None
            for n, _ in tc.feed(tokens[done:], abortable=abortable):
                if done + n < len(tokens):
                    yield done + n, None
            if not _hand(tc, ctx):
                _reread(ctx, held + tokens[start:])
            yield len(tokens), None
        finally:
            tc.close()

    # -- the parallel slots ------------------------------------------------------------------
    def plan_seq(self, shared: SharedContext, seq: int, total: int, images: Sequence[object] = ()) -> bool:
        """Whether a slot's `total` prompt tokens after what its sequence holds are read on the twin
        (`feed_seq`): the verdict says it pays, or the slots' passes told the target's rate and the
        twin's is not known yet (this read measures it: a prompt of two chunks or more)."""
        if self.mode == "never" or images or shared.recurrent or total < 1:
            return False
        if self.mode == "always":
            return True
        if not self.model.repacked:
            return False
        v = self._verdict(shared.n_threads)
        if v is None:
            part = self._partial.get(shared.n_threads, {})
            return "target_tok_s" in part and "plain_tok_s" not in part and total >= 2 * shared.n_batch
        held = len(shared.tokens[seq])
        return self._pays(v, total, held, shared.n_seq)

    def feed_seq(self, shared: SharedContext, seq: int, tokens: Sequence[int], chunk: int = 256) -> Iterator[int]:
        """Read a slot's `tokens` after what sequence `seq` holds on the twin, `chunk` tokens per
        `next` (a scheduler step: the other slots' passes run between), yielding tokens done; at
        the end the sequence holds them all. TwinRefused where llama.cpp refused a state."""
        tokens = list(tokens)
        held = list(shared.tokens[seq])
        twin, load_s = self._twin_model()
        tc = SharedContext(twin, self._seq_runtime(shared, len(held) + len(tokens)), shared.n_seq)
        try:
            if held and not _hand_seq(shared, tc, seq):
                raise TwinRefused(emptied=False)
            done, seconds = 0, 0.0
            while done < len(tokens):
                part = tokens[done:done + min(chunk, tc.n_batch)]
                t = time.perf_counter()
                tc.decode([Part(seq, part, "none")])
                seconds += time.perf_counter() - t
                done += len(part)
                if done < len(tokens):
                    yield done
            if done >= 128:
                self._record(shared.n_threads, None, done / seconds, load_s)
            if not _hand_seq(tc, shared, seq):
                raise TwinRefused(emptied=True)
            yield done
        finally:
            tc.close()

    @staticmethod
    def _seq_runtime(shared: SharedContext, need: int) -> RuntimeParams:
        """The slots' twin: as many streams, each with room for `need` (`_twin_cells`), the slots'
        batch and threads."""
        per = _twin_cells(shared.model, shared.n_ctx_seq, need + 1)
        return RuntimeParams(n_ctx=per * shared.n_seq, n_batch=shared.n_batch, n_threads=shared.n_threads,
                             n_gpu_layers=0)

    def _twin_model(self) -> tuple[Model, float]:
        """The twin, loaded once (the engine's decoders and its parallel slots' thread may both
        ask); the seconds this call spent loading it."""
        with self._loading:
            if self._twin is not None:
                return self._twin, 0.0
            t = time.perf_counter()
            self._twin = Model(self.model.path, runtime=RuntimeParams(n_gpu_layers=0), repack=False)
            return self._twin, time.perf_counter() - t

    @staticmethod
    def _runtime(ctx: Context, n: int) -> RuntimeParams:
        """The twin context: the target context's batch and threads, room for what it holds and
        `n` more (`_twin_cells`)."""
        size = _twin_cells(ctx.model, ctx.n_ctx, ctx.n_past + n + 1)
        return RuntimeParams(n_ctx=size, n_batch=ctx.n_batch, n_threads=ctx.n_threads, n_gpu_layers=0)

    def _record(self, threads: int, target_rate: float | None, plain_rate: float | None, load_s: float) -> None:
        """Keep the rates measured (either may wait for the other: `_partial`); stored once both are."""
        part = self._partial.setdefault(threads, {})
        if target_rate is not None:
            part["target_tok_s"] = round(target_rate, 2)
        if plain_rate is not None:
            part["plain_tok_s"] = round(plain_rate, 2)
        if load_s > 0:
            part["load_s"] = round(load_s, 3)
        if "target_tok_s" in part and "plain_tok_s" in part:
            v = {"load_s": 1.0, **part}
            self._verdicts[threads] = self.verdict = v
            if self.keep:
                calibration.save({f"{self._key}|t{threads}": v})

    def observe_target(self, threads: int, tokens: int, seconds: float) -> None:
        """A pass of the target's that only read `tokens` prompt tokens (the slots' reading rate)."""
        if tokens >= 128 and seconds > 0 and self._verdict(threads) is None:
            self._record(threads, tokens / seconds, None, 0.0)

    def close(self) -> None:
        if self._twin is not None:
            self._twin.close()
            self._twin = None


def _twin_cells(model: Model, cap: int, need: int) -> int:
    """KV cells for a twin sequence that must hold `need` tokens, of the target's `cap`: `need`
    rounded up to 256 (not the whole window: a 32k context's KV again for a 2k prompt), all of
    `cap` on a sliding-window model, whose window cache depends on the size."""
    windowed = model.header.arch_value("attention.sliding_window") is not None
    return max(cap if windowed else min(cap, -(-need // 256) * 256), 256)


def _hand_seq(src: SharedContext, dst: SharedContext, seq: int) -> bool:
    """Sequence `seq` of `dst` holds what `seq` of `src` holds; False when llama.cpp refuses."""
    data = src.save_state(seq)
    return data is not None and dst.load_state(seq, data, keyed(src.tokens[seq], src.images[seq]))


def _kv_bytes_per_token(model: Model) -> int:
    """A token's K and V rows in every layer at 16 bits: what a state handover copies."""
    h = model.header
    layers, embd = h.arch_value("block_count", 0), h.arch_value("embedding_length", 0)
    heads, kv_heads = h.arch_value("attention.head_count", 0), h.arch_value("attention.head_count_kv", 0)
    if isinstance(kv_heads, list):  # per layer on some architectures
        kv_heads = max(kv_heads, default=0)
    if not all(isinstance(x, int) and x > 0 for x in (layers, embd, heads, kv_heads)):
        return 32 * 1024  # unknown: about a 1.5B's
    return 2 * 2 * layers * embd // heads * kv_heads


def _here(ctx: Context, tokens: list[int], done: int, abortable: bool) -> Iterator[tuple[int, None]]:
    """The rest of `tokens` (from `done`) read on `ctx` itself."""
    for n, _ in ctx.feed(tokens[done:], abortable=abortable):
        yield done + n, None


def _reread(ctx: Context, tokens: list[int]) -> None:
    """`ctx` holds `tokens`, read again from the start: a state llama.cpp refused (never seen:
    the twin is the same file with the same KV types) costs time, never the answer."""
    ctx.clear()
    for _ in ctx.feed(tokens):
        pass


def _hand(src: Context, dst: Context) -> bool:
    """`dst` holds what `src` holds (its sequence state copied); False when llama.cpp refuses."""
    data = src.save_state()
    return data is not None and dst.load_state(data, src.keyed_tokens())


__all__ = ["MODES", "PlainReader", "TwinRefused", "reading_mode"]
