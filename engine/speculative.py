"""The decoder loop: prefill, then steps of draft -> verify -> accept -> roll back.

Each step feeds the target one batch: the last emitted token (not yet in its KV cache)
followed by the k drafted tokens, asking logits for every row. Row i verifies draft i; the
last row yields the bonus token. Rejected drafts are removed from the target's KV cache by
truncation; the drafter re-syncs its own cache by common prefix on its next proposal.
"""

from __future__ import annotations

import codecs
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

from .drafters import Drafter
from .errors import Cancelled, PromptError, UnsupportedModelError
from .events import DoneEvent, Event, PrefillEvent, RunStats, StepEvent, TokenEvent
from .llama import Context, Model
from .lookahead import CostModel, Fixed, Lookahead
from .sampling import GREEDY, Sampler, SamplingParams, verify


@dataclass
class GenerationConfig:
    max_tokens: int = 512
    stop: Sequence[str] = ()
    sampling: SamplingParams = GREEDY


class CancelToken:
    """Thread-safe cancel flag; also interrupts a running prefill decode."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._contexts: list[Context] = []

    def cancel(self) -> None:
        self._event.set()
        for c in list(self._contexts):
            c.abort()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def watch(self, ctx: Context) -> None:
        self._contexts.append(ctx)


class _TextAssembler:
    """Turns token bytes into whole UTF-8 text, holding back possible stop-string prefixes.

    Each token becomes a pending entry (its completed characters); entries are released
    once no stop string could still begin inside them. When a stop string appears, the text
    before it is released and the rest dropped.
    """

    def __init__(self, stop: Sequence[str]):
        self.stop = [s for s in stop if s]
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""  # all decoded text, including pending
        self.released = 0  # chars of self.text already released
        self.pending: list[tuple[int, str, int]] = []  # (token index, text, end offset in self.text)
        self.stopped = False

    def add(self, index: int, data: bytes) -> list[tuple[int, str]]:
        piece = self.decoder.decode(data)
        self.text += piece
        self.pending.append((index, piece, len(self.text)))
        return self._release()

    def _release(self) -> list[tuple[int, str]]:
        if self.stop:
            lo = max(0, self.released - max(len(s) for s in self.stop))
            hits = [i for i in (self.text.find(s, lo) for s in self.stop) if i >= 0]
            if hits:
                cut = min(hits)
                self.stopped = True
                return self._emit_until(cut, trim=True)
            safe = len(self.text) - self._held_suffix()
        else:
            safe = len(self.text)
        return self._emit_until(safe, trim=False)

    def _held_suffix(self) -> int:
        """Length of the longest text suffix that is a proper prefix of a stop string."""
        best = 0
        for s in self.stop:
            for n in range(min(len(s) - 1, len(self.text)), best, -1):
                if self.text.endswith(s[:n]):
                    best = n
                    break
        return best

    def _emit_until(self, limit: int, *, trim: bool) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        while self.pending:
            idx, piece, end = self.pending[0]
            start = end - len(piece)
            if end <= limit:
                out.append((idx, piece))
                self.pending.pop(0)
            elif trim and start < limit:
                out.append((idx, piece[: limit - start]))
                self.pending.pop(0)
                break
            else:
                break
        if trim:
            self.pending.clear()
            self.text = self.text[:limit]
        self.released = max(self.released, min(limit, len(self.text)))
        return out

    def flush(self) -> list[tuple[int, str]]:
        tail = self.decoder.decode(b"", final=True)
        if tail and self.pending:
            idx, piece, end = self.pending[-1]
            self.pending[-1] = (idx, piece + tail, end + len(tail))
            self.text += tail
        return self._emit_until(len(self.text), trim=False)


class Decoder:
    """Runs generations for one target with an optional drafter.

    The target context and the cost model persist across runs, so timings learned in one
    generation inform `Auto` in the next. `lookahead` may be replaced, or a `Fixed`'s k set,
    from another thread while `run` iterates: it applies from the next step.
    """

    def __init__(
        self,
        target: Model,
        drafter: Drafter | None = None,
        lookahead: Lookahead | None = None,
        *,
        n_ctx: int = 4096,
        n_batch: int = 512,
        n_threads: int | None = None,
        cost: CostModel | None = None,
    ):
        if drafter is not None and not target.can_rollback:
            raise UnsupportedModelError(
                f"{target.path}: {target.architecture} keeps a recurrent state that cannot be rolled back, "
                "so it cannot verify drafts; run it without a draft"
            )
        self.target = target
        self.drafter = drafter
        self.lookahead: Lookahead = lookahead if lookahead is not None else Fixed(0 if drafter is None else 4)
        self.ctx = Context(target, n_ctx=n_ctx, n_batch=n_batch, n_threads=n_threads)
        self.cost = cost or CostModel()
        if drafter is not None and getattr(drafter, "model", None) is not None and target.size_bytes:
            self.cost.draft_ratio_prior = max(0.02, drafter.model.size_bytes / target.size_bytes)  # type: ignore[attr-defined]
        elif drafter is not None:
            self.cost.draft_ratio_prior = 0.01
        self._lock = threading.Lock()

    @property
    def n_ctx(self) -> int:
        return self.ctx.n_ctx

    @property
    def mode(self) -> str:
        return "target" if self.drafter is None else self.drafter.kind

    def close(self) -> None:
        self.ctx.close()
        if self.drafter is not None:
            self.drafter.close()

    # -- the loop ------------------------------------------------------------------------
    def run(
        self,
        prompt_tokens: Sequence[int],
        config: GenerationConfig | None = None,
        cancel: CancelToken | None = None,
    ) -> Iterator[Event]:
        """Generate from `prompt_tokens`, yielding events; the last one is a `DoneEvent`."""
        with self._lock:
            yield from self._run(list(prompt_tokens), config or GenerationConfig(), cancel or CancelToken())

    def _run(self, prompt: list[int], cfg: GenerationConfig, cancel: CancelToken) -> Iterator[Event]:
        t0 = time.perf_counter()
        target, ctx = self.target, self.ctx
        if not prompt:
            raise PromptError("the prompt is empty")
        if len(prompt) >= ctx.n_ctx:
            raise PromptError(
                f"the prompt is {len(prompt)} tokens but the context holds {ctx.n_ctx}; "
                "shorten it or raise the context size"
            )
        bad = [t for t in prompt if not 0 <= t < target.n_vocab]
        if bad:
            raise PromptError(f"prompt token id {bad[0]} is outside the vocabulary (0..{target.n_vocab - 1})")
        sampler = Sampler(cfg.sampling)
        stats = RunStats(prompt_tokens=len(prompt), mode=self.mode, lookahead=self.lookahead.label)
        counts = {"draft": 0, "target": 0, "bonus": 0, "plain": 0}
        text = _TextAssembler(cfg.stop)
        cancel.watch(ctx)

        # Prefill: reuse the cached prefix (chat turns), evaluate the rest but the last token.
        keep = ctx.reuse_prefix(prompt)
        todo = prompt[keep:-1]
        total = len(todo)
        done = 0
        yield PrefillEvent(0, total)
        try:
            if cancel.cancelled:
                raise Cancelled("cancelled")
            for done, _ in ctx.feed(todo, abortable=True):
                yield PrefillEvent(done, total)
                if cancel.cancelled and done < total:
                    raise Cancelled("cancelled")
        except Cancelled:
            ctx.truncate(keep + done)
            stats.finish_reason, stats.stopped_by = "cancelled", "cancel"
            stats.wall_s = time.perf_counter() - t0
            stats.prefill_s = stats.wall_s
            stats.provenance_counts = counts
            yield DoneEvent("", [], stats.finalize())
            return
        if self.drafter is not None:
            self.drafter.begin(prompt)
            if self.lookahead.label != "0":
                draft_ctx = getattr(self.drafter, "ctx", None)
                if draft_ctx is not None:
                    cancel.watch(draft_ctx)
                try:
                    self.drafter.prefill(prompt, lambda: cancel.cancelled)
                except Cancelled:
                    pass  # the step loop sees the cancel and finishes cleanly
            if self.lookahead.label == "auto" and not self.cost.calibrated and not cancel.cancelled:
                self._calibrate(prompt[-1])
        t_prefill = time.perf_counter()
        stats.prefill_s = t_prefill - t0

        generated: list[int] = []
        provenance: list[str] = []
        context = list(prompt)
        pending = prompt[-1]  # emitted (or last prompt) token not yet in the target's KV
        step = 0
        finish, stopped_by = "", ""
        first_token_t: float | None = None

        while not finish:
            if cancel.cancelled:
                finish, stopped_by = "cancelled", "cancel"
                break
            room_ctx = ctx.n_ctx - ctx.n_past - 1  # batch = pending + k drafts
            if room_ctx < 0:
                finish, stopped_by = "length", "context_full"
                break
            remaining = cfg.max_tokens - len(generated)
            if remaining <= 0:
                finish, stopped_by = "length", "max_tokens"
                break
            k_req = 0
            drafts: list[int] = []
            dists: list = []
            t_d0 = time.perf_counter()
            if self.drafter is not None:
                k_req = self.lookahead.choose(min(room_ctx, remaining - 1), self.cost)
                if k_req > 0:
                    prop = self.drafter.propose(context, k_req, sampler)
                    drafts, dists = prop.tokens[:k_req], prop.dists[:k_req]
            t_d1 = time.perf_counter()
            logits = ctx.decode([pending] + drafts, logits="all" if drafts else "last")
            result = verify(drafts, dists, logits, sampler)
            t_v1 = time.perf_counter()
            n_in = 1 + len(drafts)
            self.cost.observe_verify(n_in, t_v1 - t_d1)
            if drafts:
                self.cost.observe_draft(len(drafts), t_d1 - t_d0)
                self.cost.observe_acceptance(len(drafts), result.accepted)
                self.drafter.feedback(len(drafts), result.accepted)  # type: ignore[union-attr]
            self.lookahead.feedback(len(drafts), result.accepted)
            # Keep pending + accepted drafts in the KV; the final token becomes pending.
            ctx.truncate(ctx.n_past - n_in + 1 + result.accepted)
            new_tokens = drafts[: result.accepted] + [result.token]
            if not drafts:
                provs = ["plain"]
            else:
                provs = ["draft"] * result.accepted + ["target" if result.corrected else "bonus"]
            emitted = 0
            now = time.perf_counter()
            for tok, prov in zip(new_tokens, provs):
                if target.is_eog(tok):
                    finish, stopped_by = "stop", "eos"
                    break
                generated.append(tok)
                provenance.append(prov)
                context.append(tok)
                counts[prov] += 1
                emitted += 1
                if first_token_t is None:
                    first_token_t = now
                for idx, piece in text.add(len(generated) - 1, target.piece(tok)):
                    yield TokenEvent(piece, generated[idx], provenance[idx], idx, step, now - t0)  # type: ignore[arg-type]
                if text.stopped:
                    finish, stopped_by = "stop", "stop_string"
                    break
                if len(generated) >= cfg.max_tokens:
                    finish, stopped_by = "length", "max_tokens"
                    break
            pending = result.token
            stats.steps += 1
            stats.drafted += len(drafts)
            stats.accepted += result.accepted
            stats.draft_s += t_d1 - t_d0
            stats.verify_s += t_v1 - t_d1
            yield StepEvent(
                step,
                k_req,
                len(drafts),
                result.accepted,
                emitted,
                (t_d1 - t_d0) * 1000.0,
                (t_v1 - t_d1) * 1000.0,
                now - t0,
            )
            step += 1

        if not text.stopped:
            for idx, piece in text.flush():
                yield TokenEvent(piece, generated[idx], provenance[idx], idx, step, time.perf_counter() - t0)  # type: ignore[arg-type]
        t_end = time.perf_counter()
        stats.generated_tokens = len(generated)
        stats.finish_reason, stats.stopped_by = finish, stopped_by
        stats.decode_s = t_end - t_prefill
        stats.wall_s = t_end - t0
        stats.time_to_first_token_s = (first_token_t - t0) if first_token_t is not None else 0.0
        stats.provenance_counts = counts
        yield DoneEvent(text.text, generated, stats.finalize())

    def _calibrate(self, probe_token: int) -> None:
        """Measure the target's verify cost for a few batch sizes (once per pair).

        Decodes throwaway tokens after the prompt and removes them again. About 20 single
        decodes' worth of time on a CPU; milliseconds on a GPU.
        """
        ctx = self.ctx
        base = ctx.n_past
        for n in (1, 2, 4, 8, 16):
            if base + n > ctx.n_ctx or n > ctx.n_batch:
                break
            for _ in range(2):
                t = time.perf_counter()
                ctx.decode([probe_token] * n, logits="all")
                self.cost.observe_verify(n, time.perf_counter() - t)
                ctx.truncate(base)
