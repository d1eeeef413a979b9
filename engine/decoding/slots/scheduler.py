"""Up to N generations at once over one target: each step, one `llama_decode` carries every
active slot's rows: a new prompt's next chunk, or a running slot's pending token and drafts.

Each slot is the single-sequence `Decoder` on its own sequence of a `SharedContext`: the
scheduler calls its step halves (`planning` drafts, `judge` verifies the slot's own rows
with its own `Verifier` and rolls back its own rejected tail, `settle` emits) around the
shared pass, so the exact acceptance rule, the events and the stats are the decoder's own.
The slots drafting with a draft model draft together, on the sequences of one draft context
(drafting/batched_drafter.py): their catch-ups and a new slot's read of its prompt (at its first
step, a chunk a pass beside the others' drafting), then one decode per draft position
carrying a row per slot still drafting, each slot with its own k, sampling and roll-back; the
slots drafting with an MTP head the same way, on the sequences of one head context (`HeadBatch`).
Requests beyond N wait; a cancelled request ends at the next step and frees its slot.

Hybrid targets (Qwen3.5, LFM2) run too: each slot's sequence takes its rejected drafts back by its
own snapshots or checkpoint (`SharedContext`), and a slot that verifies drafts has its rows
decoded in a `llama_decode` of their own after the shared one, so on a hybrid the drafting slots'
verify passes are not batched together (a slot reused by the next request keeps its state only
when it holds a start of the new prompt whole).

A prompt's pictures (`ImageSpan`s from the target's projector, as `Decoder.run` takes them) are
read where their spans start, each in a decode of its own for its slot's sequence just before
the shared pass (a llama_batch carries embeddings or token ids, not both); a prompt chunk stops
at a picture. Drafters see the placeholder run, as on the single-sequence path.
"""

from __future__ import annotations

import logging
import queue as _queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from ...errors import PromptError, TandemError
from ...llamacpp.context import common_prefix, keyed
from ...llamacpp.llama import Model
from ...llamacpp.plain_reader import PlainReader, TwinRefused
from ...llamacpp.runtime import RuntimeParams
from ...llamacpp.sequences import Part, SharedContext
from ..cancel import CancelToken
from ..decoder import RECURRENT_SNAPSHOTS, Decoder, EngineClosedError, StepPlan
from ..drafting.batched_drafter import DraftBatch
from ..drafting.cost_model import CostModel
from ..drafting.drafter_api import Drafter
from ..drafting.mtp_drafter import HeadBatch
from ..events import Event, PrefillEvent
from ..prompt_cache import PromptCache
from ..request import GenerationRequest
from .planning import plan_slots
from .slot_drafters import close_batches, close_drafters, make_drafters, share_heads

log = logging.getLogger(__name__)


@dataclass
class _Job:
    prompt: list[int]
    request: GenerationRequest
    cancel: CancelToken
    draft: str
    images: list[Any] = field(default_factory=list)  # the pictures in `prompt` (ImageSpans), in order
    events: "_queue.SimpleQueue[Event | BaseException | None]" = field(default_factory=_queue.SimpleQueue)


@dataclass
class _Slot:
    """One sequence of the shared context and the request it runs (None: free)."""

    index: int
    decoders: dict[str, Decoder]  # one per draft kind, all on this slot's sequence
    decoder: Decoder  # the running request's
    job: _Job | None = None
    run: object = None  # the decoder's run state
    todo: list[int] | None = None  # prompt still to read (None: reading done, the slot steps)
    read: int = 0
    cached: int = 0
    plain: Iterator[int] | None = None  # its prompt being read on the target's plain twin, a chunk a step
    finished: int = 0  # requests this slot has answered to their end (for /metrics)
    generated: int = 0  # tokens it wrote for them
    accepted: int = 0  # drafted tokens the target accepted in it


class SlotScheduler:
    """Runs requests on `n_slots` sequences of one context, one shared decode per step.

    `drafters` names the drafts a request may ask for, each with what makes a slot's drafter
    (called once per slot and name; None: no draft): a free drafter (prompt lookup, suffix), a
    draft model's (its slots then draft on the sequences of one draft context, `DraftBatch`, their
    decodes batched each step; a hybrid or bridged draft keeps a context per slot, drafting slot
    by slot), or an MTP head: the target's own or Gemma 4's assistant, its slots' heads sequences of
    one head context (`HeadBatch`, made over the shared context before anything is decoded), each
    fed its slot's hidden states (an assistant reads the target's cache on its slot's sequence id).
    Each draft name's slots share a cost model (`costs`: a model draft's acceptance and draft time
    are not a free drafter's, whose proposals cost nothing), all of them learning the target's curve
    from the shared passes; `seed` fills each before the first request (the engine's measured
    costs for that drafter: `Engine.seed_cost`), so Auto does not start from its priors.
    `prompt_cache` (the engine's): a slot starts from the longest start of its prompt that its
    sequence or the cache holds, and each finished request's state is kept there (states of this
    many slots' sequences: a lone context's are not theirs, llama.cpp's bytes name the streams).
    `stream` may be called from any thread; the slots run on one thread of the scheduler's own.
    """

    def __init__(self, target: Model, n_slots: int, *, runtime: RuntimeParams | None = None,
                 drafters: Mapping[str, Callable[[], Drafter | None]] | None = None,
                 seed: Callable[[CostModel, Drafter | None], None] | None = None,
                 prompt_cache: PromptCache | None = None, reader: PlainReader | None = None):
        self.reader = reader
        self.draft_batches: dict[Any, DraftBatch | HeadBatch] = {}  # by the context a slot's draft rows name
        made = make_drafters(drafters or {"none": lambda: None}, n_slots, self.draft_batches)
        try:
            # A hybrid target takes each slot's rejected drafts back through its own snapshots.
            self.shared = SharedContext(target, runtime, n_slots,
                                        rollback=RECURRENT_SNAPSHOTS if any(d for m in made for d in m.values()) else 0)
        except BaseException:
            close_drafters(made)
            close_batches(self.draft_batches)
            raise
        if self.shared.n_batch < n_slots:
            self.shared.close()
            close_drafters(made)
            close_batches(self.draft_batches)
            raise TandemError(f"the batch ({self.shared.n_batch} tokens) must hold at least one token per slot ({n_slots})")
        # The slots' own, not the engine's: a batched pass's time is not a lone pass's. One per
        # draft name: a decoder tells its cost model whether its drafter's proposals are free,
        # and one model shared by all names took the last name's word for every slot (measured:
        # a model draft priced as free drafted up to 16 tokens a step, 4 slots at 0.4x of none).
        self.costs: dict[str, CostModel] = {name: CostModel() for name in made[0]}
        self.slots: list[_Slot] = []
        try:
            if seed is not None:
                for name, cost in self.costs.items():
                    seed(cost, made[0][name])
            share_heads(made, self.shared, self.draft_batches)
            for i, mine in enumerate(made):
                decoders = {name: Decoder(target, d, cost=self.costs[name], context=self.shared.view(i),
                                          prompt_cache=prompt_cache)
                            for name, d in mine.items()}
                self.slots.append(_Slot(i, decoders, next(iter(decoders.values()))))
        except BaseException:
            close_drafters(made)
            close_batches(self.draft_batches)
            self.shared.close()
            raise
        self.target = target
        self._cond = threading.Condition()
        self._waiting: deque[_Job] = deque()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="tandem-slots", daemon=True)
        self._thread.start()

    @property
    def n_slots(self) -> int:
        return len(self.slots)

    def busy(self) -> list[bool]:
        """Per slot, whether it runs a request now."""
        return [s.job is not None for s in self.slots]

    def counts(self) -> list[tuple[int, int, int]]:
        """Per slot, (requests answered to their end, tokens written, drafted tokens accepted)."""
        return [(s.finished, s.generated, s.accepted) for s in self.slots]

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def drafts(self) -> list[str]:
        """The draft names a request may ask for."""
        return list(self.slots[0].decoders)

    def stream(self, prompt_tokens: Sequence[int], request: GenerationRequest | None = None,
               cancel: CancelToken | None = None, *, draft: str | None = None,
               images: Sequence[Any] = ()) -> Iterator[Event]:
        """Generate from `prompt_tokens` in the next free slot with the draft named `draft` (None:
        the first of `drafts`), yielding the decoder's events (the last a `DoneEvent`). Leaving the
        iteration early cancels the request. `images`: the pictures among the tokens (`ImageSpan`s
        from the target's projector, as `Decoder.run` takes them)."""
        prompt = list(prompt_tokens)
        draft = self.drafts[0] if draft is None else draft
        if draft not in self.slots[0].decoders:
            raise TandemError(f"the parallel slots draft with {', '.join(self.drafts)}, not {draft!r}")
        if images and images[-1].end >= len(prompt):
            raise PromptError("a picture cannot end the prompt: text must follow it")
        job = _Job(prompt, request or GenerationRequest(prompt), cancel or CancelToken(), draft, list(images))
        with self._cond:
            if self._closed:
                raise EngineClosedError("this engine was closed: load the model again")
            self._waiting.append(job)
            self._cond.notify()
        ended = False
        try:
            while True:
                item = job.events.get()
                if item is None:
                    ended = True
                    return
                if isinstance(item, BaseException):
                    ended = True
                    raise item
                yield item
        finally:
            if not ended:
                job.cancel.cancel()
                with self._cond:
                    self._cond.notify()

    def close(self) -> None:
        """Cancel every request, stop the slots' thread, free the context."""
        with self._cond:
            self._closed = True
            for job in self._waiting:
                job.events.put(EngineClosedError("this engine was closed: load the model again"))
            self._waiting.clear()
            for s in self.slots:
                if s.job is not None:
                    s.job.cancel.cancel()
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._free_drafters()
        close_batches(self.draft_batches)
        self.shared.close()

    def _free_drafters(self) -> None:
        close_drafters([{n: dec.drafter for n, dec in s.decoders.items()} for s in self.slots])

    # -- the slots' thread ---------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._waiting and not any(s.job for s in self.slots):
                    self._cond.wait()
                if self._closed and not any(s.job for s in self.slots):
                    return
                admitted = []
                for slot in self._free_slots():
                    if not self._waiting or self._closed:
                        break
                    admitted.append((slot, self._waiting.popleft()))
            try:
                for slot, job in admitted:
                    self._admit(slot, job)
                self._step()
            except Exception as e:  # a bug: the requests running now fail with it, the slots live on
                for slot in self.slots:
                    if slot.job is not None:
                        self._fail(slot, e)

    def _free_slots(self) -> list[_Slot]:
        """Free slots, the one holding the longest start of the next waiting prompt first
        (its sequence keeps that prefix: the prompt is read from where they part; on a hybrid
        only a sequence that is a start of the prompt whole keeps anything)."""
        free = [s for s in self.slots if s.job is None]
        if self._waiting and len(free) > 1:  # pictures compared by content (their cells keyed)
            head = keyed(self._waiting[0].prompt, self._waiting[0].images)
            shared = self.shared

            def kept(s: _Slot) -> int:
                held = keyed(shared.tokens[s.index], shared.images[s.index])
                n = min(common_prefix(held, head), len(head) - 1)  # the last token is read, as reuse_prefix leaves it
                return 0 if shared.recurrent and n < len(held) else n
            free.sort(key=lambda s: -kept(s))
        return free

    def _admit(self, slot: _Slot, job: _Job) -> None:
        dec = slot.decoder = slot.decoders[job.draft]
        try:
            run = dec._start(job.prompt, job.request, job.cancel)
        except BaseException as e:  # bad prompt or request: that request's error alone
            job.events.put(e)
            return
        run.images = job.images
        slot.job, slot.run = job, run
        slot.cached = dec._kept_prefix(run)  # type: ignore[arg-type]
        slot.todo, slot.read = job.prompt[slot.cached:-1], 0
        job.events.put(PrefillEvent(0, len(slot.todo), cached=slot.cached))
        if not slot.todo:
            self._prompt_read(slot)
        elif self.reader is not None and self.reader.plan_seq(self.shared, slot.index, len(slot.todo), job.images):
            slot.plain = self.reader.feed_seq(self.shared, slot.index, slot.todo)

    def _prompt_read(self, slot: _Slot) -> None:
        slot.todo = None
        if slot.decoder.ctx.recurrent:  # its state cannot be cut back to the prompt later: keep it now
            self._remember(slot, slot.run)
        # A model draft reads the prompt at the slot's first step, in the draft passes it shares
        # with the other slots (a chunk a pass), not alone here.
        for ev in slot.decoder._ready(slot.run, read_now=False):  # type: ignore[arg-type]
            slot.job.events.put(ev)  # type: ignore[union-attr]

    def _step(self) -> None:
        """One shared decode: every stepping slot's plan, then the prompts' chunks in what is left."""
        budget = self.shared.n_batch
        chunks: list[tuple[_Slot, int]] = []
        plain: list[_Slot] = []  # reading on the plain twin: a chunk each after the shared pass
        stepping = [s for s in self.slots if s.job is not None and s.todo is None]
        made = plan_slots(stepping, self.draft_batches, self._finish, self._fail)
        plans: list[tuple[_Slot, StepPlan]] = []
        for n, slot in enumerate(stepping):
            plan = made.get(n)
            if plan is None:
                continue
            fits = budget - (len(stepping) - n - 1)  # one row for each slot after this one
            if len(plan.rows) > fits:  # fewer drafts: still exact, the rest are drafted again
                plan.prop = plan.prop.cut(fits - 1)
                plan.drafts, plan.rows = plan.prop.tokens, plan.rows[:fits]
            budget -= len(plan.rows)
            plans.append((slot, plan))
        for slot in self.slots:
            if slot.job is None or slot.todo is None:
                continue
            if slot.job.cancel.cancelled:
                slot.run.end("cancelled", "cancel")  # type: ignore[attr-defined]
                slot.run.t_prefill = time.perf_counter()  # type: ignore[attr-defined]
                self._finish(slot)
            elif slot.plain is not None:
                plain.append(slot)
            elif self._read_pictures(slot) and slot.todo is not None and budget > 0:
                take = min(budget, self._text_ahead(slot))
                chunks.append((slot, take))
                budget -= take
        parts = [Part(s.index, p.rows, "all" if p.drafts else "last") for s, p in plans]
        parts += [Part(s.index, s.todo[s.read:s.read + n], "none") for s, n in chunks]  # type: ignore[index]
        if parts:
            self._pass(parts, plans, chunks)
        for slot in plain:
            self._read_plain(slot)

    def _pass(self, parts: list[Part], plans: list[tuple[_Slot, StepPlan]], chunks: list[tuple[_Slot, int]]) -> None:
        """The shared decode of `_step`: its passes priced, its plans settled, its chunks counted."""
        t = time.perf_counter()
        try:
            rows = self.shared.decode(parts)
        except BaseException as e:  # the pass failed for every slot in it
            for slot in [s for s, _ in plans] + [s for s, _ in chunks]:
                self._fail(slot, e)
            return
        # The verify curve the slots' Auto prices is of whole passes: all their rows, one time,
        # whatever drafted them (the target's curve, in every draft name's cost model). A pass
        # that also read a prompt's chunk is left out: those rows need no logits (the output
        # layer is about 15% of a 1.5B Qwen's work a row), so they drew the curve below what
        # verify rows cost, and Auto drafted where the pass then took longer than it priced;
        # it tells what reading a prompt's token costs instead (a model draft's reading is priced by it).
        seconds, steps = time.perf_counter() - t, sum(len(p.rows) for _, p in plans)
        if chunks:  # what reading a prompt's token costs in these passes: the pass less its verify rows
            # (every draft name's model holds the same curve: all of them observe every pass)
            reading = seconds - (next(iter(self.costs.values())).verify_time(steps) if steps else 0.0)
        for cost in self.costs.values():
            if not chunks:
                cost.observe_verify(steps, seconds)
            else:
                cost.observe_target_read(sum(n for _, n in chunks), reading)
        if chunks and not plans and self.reader is not None:  # a pass that only read: the target's reading rate
            self.reader.observe_target(self.shared.n_threads, sum(n for _, n in chunks), seconds)
        for _, plan in plans:
            plan.pass_observed = True
        for (slot, plan), logits in zip(plans, rows):
            self._settle(slot, plan, logits, t)
        for slot, n in chunks:
            slot.read += n
            total = len(slot.todo)  # type: ignore[arg-type]
            slot.job.events.put(PrefillEvent(slot.read, total, cached=slot.cached))  # type: ignore[union-attr]
            if slot.read == total:
                self._prompt_read(slot)

    def _read_plain(self, slot: _Slot) -> None:
        """One chunk of the slot's prompt on the plain twin; where llama.cpp refused a state, the
        slot reads the rest (or all, if its sequence lost what it held) in the shared passes."""
        try:
            slot.read = next(slot.plain)  # type: ignore[arg-type]
        except TwinRefused as e:
            slot.plain = None
            if e.emptied:
                slot.cached, slot.read = 0, 0
                slot.todo = slot.job.prompt[:-1]  # type: ignore[union-attr]
            return
        except BaseException as e:
            self._fail(slot, e)
            return
        total = len(slot.todo)  # type: ignore[arg-type]
        slot.job.events.put(PrefillEvent(slot.read, total, cached=slot.cached))  # type: ignore[union-attr]
        if slot.read == total:
            slot.plain = None
            self._prompt_read(slot)

    def _next_picture(self, slot: _Slot) -> Any:
        """The first of the slot's pictures not read yet (None: only text is left)."""
        at = slot.cached + slot.read
        return next((s for s in slot.job.images if s.start >= at), None)  # type: ignore[union-attr]

    def _text_ahead(self, slot: _Slot) -> int:
        """How much of the slot's prompt is text before its next picture (or its end)."""
        span = self._next_picture(slot)
        end = len(slot.todo) if span is None else span.start - slot.cached  # type: ignore[arg-type]
        return end - slot.read

    def _read_pictures(self, slot: _Slot) -> bool:
        """Read the pictures the slot's prompt has next, each in a decode of its own for its
        sequence; False when one failed (the slot's request fails with it). The slot's prompt
        may be read whole by then."""
        job = slot.job
        assert job is not None and slot.todo is not None
        while (span := self._next_picture(slot)) is not None and span.start == slot.cached + slot.read:
            try:
                slot.decoder.ctx.read_image(span)  # type: ignore[attr-defined]
            except BaseException as e:
                self._fail(slot, e)
                return False
            slot.read += span.n_tokens
            job.events.put(PrefillEvent(slot.read, len(slot.todo), cached=slot.cached))
            if slot.read == len(slot.todo):
                self._prompt_read(slot)
                break
        return True

    def _settle(self, slot: _Slot, plan: StepPlan, logits, t_pass: float) -> None:
        dec, run, job = slot.decoder, slot.run, slot.job
        assert job is not None
        if plan.draft_s is None:  # its own drafting, not the slots' planned after it
            plan.draft_s = plan.t_d1 - plan.t_d0
        plan.t_d1 = t_pass  # the slot's verify time is the shared pass's
        try:
            dec.judge(run, plan, logits)  # type: ignore[arg-type]
            result = dec.settle(run, plan)  # type: ignore[arg-type]
        except BaseException as e:
            self._fail(slot, e)
            return
        if result.read is not None:  # the draft's read of the prompt, now made in the step's plan
            job.events.put(result.read)
        for ev in result.tokens:
            job.events.put(ev)
        if result.step is not None:
            job.events.put(result.step)
        if result.finished:
            self._finish(slot)

    def _finish(self, slot: _Slot) -> None:
        job, run = slot.job, slot.run
        assert job is not None
        try:
            flushed, done = slot.decoder._done(run)  # type: ignore[arg-type]
        except BaseException as e:
            self._fail(slot, e)
            return
        for ev in flushed:
            job.events.put(ev)
        slot.finished += 1
        slot.generated += done.stats.generated_tokens
        slot.accepted += done.stats.accepted
        job.events.put(done)
        job.events.put(None)
        self._free(slot)
        self._remember(slot, run)  # after its end is out: no answer waits for the copy

    def _remember(self, slot: _Slot, run: Any) -> None:
        """Keep what the slot's sequence holds in the prompt cache (a copy of its state): the next
        request that starts the same way, in any slot or after a restart, reads only the rest.
        A copy that fails costs the cache an entry, never the slots' loop."""
        try:
            slot.decoder._remember(run)
        except Exception as e:  # noqa: BLE001 - logged; the answers are out
            log.warning("prompt cache: slot %d's state not kept (%s)", slot.index, e)

    def _fail(self, slot: _Slot, error: BaseException) -> None:
        if slot.job is not None:
            slot.job.events.put(error)
        self._free(slot)

    def _free(self, slot: _Slot) -> None:
        if slot.run is not None:
            slot.run.verifier.close()  # type: ignore[attr-defined]
        if slot.plain is not None:
            slot.plain.close()  # the twin's context freed
        slot.job = slot.run = slot.todo = slot.plain = None
