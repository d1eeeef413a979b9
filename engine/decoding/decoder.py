"""The decoder loop: prefill, then steps of draft -> verify -> accept -> roll back.

Each step feeds the target one batch: the last emitted token (not yet in its KV cache)
followed by the k drafted tokens, asking logits for every row. Row i verifies draft i; the
last row yields the bonus token. Rejected drafts are removed from the target's KV cache by
truncation; the drafter re-syncs its own cache by common prefix on its next proposal.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..errors import Cancelled, NonFiniteLogits, PromptError, TandemError
from .cancel import CancelToken
from .drafting.cost_model import CostModel, TextAcceptance
from .drafting.drafter_api import Steps, steps_alone
from .drafting.drafters import DraftContext, Drafter, Proposal
from .events import DoneEvent, DraftReadEvent, Event, PrefillEvent, RunStats, StepEvent, TokenEvent
from .sampling.finite import model_label
from ..llamacpp.llama import Model
from ..llamacpp.context import Context
from ..llamacpp.plain_reader import PlainReader
from .sampling.logit_controls import check_logit_bias
from .drafting.lookahead import LiveLookahead
from .prompt_cache import PromptCache
from ..llamacpp.runtime import RuntimeParams
from .sampling.verifier import Verifier
from .text_assembly import TextAssembler
from .queue import GenerationQueue

if TYPE_CHECKING:
    from .request import GenerationRequest


# State snapshots a hybrid target keeps for taking drafts back (llama.cpp's n_rs_seq): each
# costs one copy of the recurrent state (~18 MB on Qwen3.5-0.8B, ~150 MB on a 27B).
RECURRENT_SNAPSHOTS = 8


class EngineClosedError(TandemError):
    """The engine (or decoder) was closed; load it again to generate."""


@dataclass
class _Run:
    """The state of one generation between steps."""

    prompt: list[int]
    request: GenerationRequest
    cancel: CancelToken
    lookahead: LiveLookahead
    verifier: Verifier  # sampler, logits processors, grammar state and logprobs of this run
    stats: RunStats
    text: TextAssembler
    t0: float
    t_prefill: float = 0.0
    generated: list[int] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)
    context: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"draft": 0, "target": 0, "bonus": 0, "plain": 0})
    pending: int = 0  # emitted (or last prompt) token not yet in the target's KV cache
    step: int = 0
    finish: str = ""
    stopped_by: str = ""
    first_token_t: float | None = None
    emitted_this_step: int = 0
    used_this_step: int = 0  # of the step's new tokens, how many were read before the run ended (the end included)
    # Tokens of the context a model drafter has not read (its prompt, deferred under Auto), while
    # it has not caught up; 0 once it has (its proposals then read the few new ones themselves).
    unread: int = 0
    reading: bool = False  # the model drafter is catching up, a chunk between target steps
    read_whole: bool = False  # its next read is all it has not read (the slots' deferred prompt read)
    draft_read: int = 0  # tokens it has read so far this run
    acceptance: TextAcceptance | None = None  # what this text's proposals were worth (Auto trims by it)
    logprobs: list[tuple[float, list[tuple[int, float]]]] = field(default_factory=list)  # per generated token, if asked
    images: list[Any] = field(default_factory=list)  # the pictures in `prompt` (ImageSpans): only the target reads them

    def end(self, finish: str, stopped_by: str) -> None:
        if not self.finish:
            self.finish, self.stopped_by = finish, stopped_by


@dataclass
class StepResult:
    """What one draft -> verify -> accept step produced."""

    tokens: list[TokenEvent]
    step: StepEvent | None  # None when the run ended before drafting (limits, cancel)
    finished: bool
    read: DraftReadEvent | None = None  # the model draft read a chunk of the context before this step


@dataclass
class StepPlan:
    """A step between its halves: what was drafted and the rows the target reads (`plan_step`),
    then the verdict on them (`judge`). The parallel slots batch several plans in one decode."""

    k_req: int
    prop: Proposal  # what is verified
    offered: Proposal  # what the drafter offered (a free drafter may offer more)
    rows: list[int]  # pending + drafts
    t_d0: float
    t_d1: float  # drafting ended, the target's pass begins
    drafts: list[int]
    result: Any = None  # the verdict (sampling.Verification), set by `judge`, with the rows logprobs read
    verified_rows: Any = None
    t_v1: float = 0.0
    read: DraftReadEvent | None = None  # the model draft read a chunk of the context before this step
    pass_observed: bool = False  # the pass was shared (parallel slots): its runner priced all its rows
    draft_s: float | None = None  # the drafting's own seconds where not t_d1 - t_d0 (a slot's share of batched passes)


class Decoder:
    """Runs generations for one target with an optional drafter.

    `run` orchestrates: `_prefill`, then `step` until the run finishes, then `_done`. The
    target context and the cost model persist across runs, so timings learned in one
    generation inform `Auto` in the next. Everything about one run (limits, sampling, the
    lookahead policy or a live handle another thread may change) comes in its
    `GenerationRequest`. Runs take turns in `queue` (the engine's, shared by all its
    decoders). `close()` may be called from another thread while a run is going: it
    cancels, waits for the current step to end, then frees.
    """

    def __init__(
        self,
        target: Model,
        drafter: Drafter | None = None,
        *,
        runtime: RuntimeParams | None = None,
        cost: CostModel | None = None,
        queue: GenerationQueue | None = None,
        prompt_cache: PromptCache | None = None,
        context: Context | None = None,
        reader: PlainReader | None = None,
    ):
        """`prompt_cache`: prompts read before (the engine's, shared by its decoders). `context`:
        the target's context to run on (a parallel slot's sequence); None: a context of its own.
        `reader`: reads long prompts through the target's unrepacked twin when that is faster."""
        self.target = target
        self.reader = reader
        self.prompt_cache = prompt_cache
        self.drafter = drafter
        # A hybrid target (Qwen3.5, LFM2) takes rejected drafts back through llama.cpp's state
        # snapshots: one per token it may have to rewind (a longer draft falls back to a checkpoint).
        self.ctx = context or Context(target, runtime, rollback=RECURRENT_SNAPSHOTS if drafter is not None else 0)
        if drafter is not None:
            try:
                drafter.bind(self.ctx)
            except BaseException:
                self.ctx.close()
                raise
        self.cost = cost or CostModel()
        if drafter is not None:
            self.cost.draft_ratio_prior = drafter.relative_cost(target)
            self.cost.free_drafter = drafter.cost_class == "free"
        self.queue = queue or GenerationQueue()
        self._step_lock = threading.Lock()
        self._closed = False
        self._active: CancelToken | None = None

    @property
    def n_ctx(self) -> int:
        return self.ctx.n_ctx

    @property
    def mode(self) -> str:
        return "target" if self.drafter is None else self.drafter.kind

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Cancel a running generation, wait for its step to end, then free the contexts."""
        self._closed = True
        active = self._active
        if active is not None:
            active.cancel()
        with self._step_lock:
            if self.drafter is not None:
                self.drafter.close()  # first: an MTP head's context is linked to the target's
            self.ctx.close()

    def forget_prompts(self) -> None:
        """Empty the target's and the drafter's KV caches: the next run reads its whole
        prompt, as a new conversation's first request does (benchmarks compare like with like)."""
        with self._step_lock:
            if self._closed:
                return
            self.ctx.clear()
            for c in self.drafter.contexts if self.drafter is not None else ():
                c.clear()

    # -- the loop ------------------------------------------------------------------------
    def run(
        self,
        prompt_tokens: Sequence[int],
        request: GenerationRequest | None = None,
        cancel: CancelToken | None = None,
        *,
        images: Sequence[Any] = (),
    ) -> Iterator[Event]:
        """Generate from `prompt_tokens` as `request` asks (its prompt was turned into these
        tokens by the caller; None: the defaults), yielding events; the last is a `DoneEvent`.
        `images`: the pictures among the tokens (`ImageSpan`s from the target's projector)."""
        from .request import GenerationRequest

        if self._closed:
            raise EngineClosedError("this engine was closed: load the model again")
        prompt = list(prompt_tokens)
        if images and images[-1].end >= len(prompt):
            raise PromptError("a picture cannot end the prompt: text must follow it")
        with self.queue.hold():
            run = self._start(prompt, request or GenerationRequest(prompt), cancel or CancelToken())
            run.images = list(images)
            self._active = run.cancel
            try:
                yield from self._prefill(run)
                while not run.finish:
                    result = self.step(run)
                    if result.read is not None:
                        yield result.read
                    yield from result.tokens
                    if result.step is not None:
                        yield result.step
                flushed, done = self._done(run)
                yield from flushed
                yield done
                self._remember(run)  # after its end is announced: no answer waits for the copy
            finally:
                self._active = None
                run.verifier.close()

    def _start(self, prompt: list[int], request: GenerationRequest, cancel: CancelToken) -> _Run:
        target, ctx = self.target, self.ctx
        if not prompt:
            raise PromptError("the prompt is empty")
        if len(prompt) >= ctx.n_ctx:
            raise PromptError(f"the prompt is {len(prompt)} tokens but the context holds {ctx.n_ctx}; "
                              "shorten it or raise the context size")
        bad = [t for t in prompt if not 0 <= t < target.n_vocab]
        if bad:
            raise PromptError(f"prompt token id {bad[0]} is outside the vocabulary (0..{target.n_vocab - 1})")
        la = request.live_lookahead()
        la.k_counts = {}
        stats = RunStats(prompt_tokens=len(prompt), mode=self.mode, lookahead=la.label if self.drafter is not None else "0")
        check_logit_bias(request.logit_bias, target.n_vocab)
        processors = request.row_processors()
        if request.grammar is None:
            verifier = Verifier(target, request.sampling, processors, logprobs=request.logprobs)
        else:
            with self._step_lock:  # the grammar reads the target's vocabulary, which `close` frees
                if self._closed:
                    raise EngineClosedError("this engine was closed: load the model again")
                verifier = Verifier(target, request.sampling, processors, grammar=request.grammar,
                                    grammar_triggers=request.grammar_triggers, logprobs=request.logprobs)
        run = _Run(prompt, request, cancel, la, verifier, stats, TextAssembler(request.stop), time.perf_counter(),
                   context=list(prompt), pending=prompt[-1], acceptance=TextAcceptance(self.cost))
        cancel.watch(ctx)
        for c in self.drafter.contexts if self.drafter is not None else ():
            cancel.watch(c)
        return run

    def _prefill(self, run: _Run) -> Iterator[Event]:
        """Read the prompt into the target (reusing a cached prefix; each chunk's time teaches
        the cost model what a token costs the target), then get the drafter ready. A model
        drafter reads the prompt now only if this run will surely draft (a fixed k > 0); under
        Auto it catches up, in chunks between target steps, once Auto decides to draft, so a
        run in which Auto never drafts costs what target alone costs."""
        ctx, cancel = self.ctx, run.cancel
        with self._step_lock:  # every llama.cpp call runs under it: `close` frees the context after
            if self._closed:
                run.end("cancelled", "cancel")
                run.t_prefill = time.perf_counter()
                return
            keep = self._kept_prefix(run)
            todo = run.prompt[keep:-1]
            how = self.reader.plan(ctx, len(todo), run.images) if self.reader is not None else None
        total, done = len(todo), 0
        yield PrefillEvent(0, total, cached=keep)
        chunks = self.reader.feed(ctx, todo, how) if how else ctx.feed(todo, abortable=True, images=run.images)
        try:
            if cancel.cancelled:
                raise Cancelled("cancelled")
            while done < total:
                with self._step_lock:  # never held across a yield: close() must not wait on a consumer
                    if self._closed:
                        raise Cancelled("closed")
                    before, t = done, time.perf_counter()
                    done, _ = next(chunks)
                    self.cost.observe_target_read(done - before, time.perf_counter() - t)
                yield PrefillEvent(done, total, cached=keep)
                if cancel.cancelled and done < total:
                    raise Cancelled("cancelled")
        except Cancelled:
            chunks.close()  # a twin reading frees its context
            if not self._closed:
                ctx.truncate(keep + done)
            run.end("cancelled", "cancel")
            run.t_prefill = time.perf_counter()
            return
        if ctx.recurrent:  # its state cannot be cut back to the prompt later: keep it now
            self._remember(run)
        yield from self._ready(run)

    def _kept_prefix(self, run: _Run) -> int:
        """Make the context hold the longest start of the run's prompt that it or the prompt cache
        has (all but the last token); how many positions that is. The caller holds the context
        (the step lock, or the parallel slots' thread)."""
        cache = self.prompt_cache if run.request.prompt_cache else None
        kept = cache.restore(self.ctx, run.prompt, run.images) if cache is not None \
            else self.ctx.reuse_prefix(run.prompt, run.images)
        run.stats.cached_tokens = kept
        return kept

    def _ready(self, run: _Run, *, read_now: bool = True) -> Iterator[DraftReadEvent]:
        """The prompt is read: get the drafter ready (a model draft reads it only if it will draft;
        not `read_now`, the parallel slots', at its first step, with the other slots' decodes)."""
        drafter = self.drafter
        if drafter is not None:
            drafter.begin(run.prompt)
            if drafter.cost_class == "model":
                with self._step_lock:  # a bridged draft retokenises with the target's vocabulary
                    run.unread = drafter.unread(run.context) if not self._closed else 0
            if run.unread and run.lookahead.current.drafts_from_start:
                yield DraftReadEvent(0, run.unread)
                if read_now:
                    yield self._read_draft(run, None)
                else:
                    run.read_whole = True
        run.t_prefill = time.perf_counter()
        run.stats.prefill_s = run.t_prefill - run.t0

    def _remember(self, run: _Run) -> None:
        """Keep what the target's context holds in the prompt cache (the next request that
        starts the same way, with any draft choice or after a restart, reads only the rest)."""
        if self.prompt_cache is None or not run.request.prompt_cache:
            return
        with self._step_lock:
            if not self._closed:
                self.prompt_cache.store(self.ctx)

    def _read_draft(self, run: _Run, limit: int | None) -> DraftReadEvent:
        return steps_alone(self._reading_draft(run, limit, batched=False))

    def _reading_draft(self, run: _Run, limit: int | None, batched: bool) -> "Steps[DraftReadEvent]":
        """Let a model drafter read `limit` more tokens of the context it has not seen (None:
        all), timed apart from drafting; what it cost teaches Auto's pricing of the next read.
        `batched`: read in steps (`reading`), its decodes made with the parallel slots'."""
        assert self.drafter is not None
        before, left, charged = run.unread, run.unread, None
        with self._step_lock:  # a draft loaded when needed loads now, apart from its reading's time
            if not self._closed:
                self.drafter.load()
        t = time.perf_counter()
        try:
            with self._step_lock:
                if not self._closed and batched:
                    left, charged = yield from self.drafter.reading(run.context, limit, lambda: run.cancel.cancelled)
                elif not self._closed:
                    left = self.drafter.read(run.context, limit, lambda: run.cancel.cancelled)
        except Cancelled:
            pass  # the step loop sees the cancel and finishes cleanly
        spent = time.perf_counter() - t if charged is None else charged
        run.stats.draft_sync_s += spent
        read = max(0, before - left)
        if read and not run.cancel.cancelled:
            self.cost.observe_draft_read(read, spent)
        run.unread, run.draft_read = left, run.draft_read + read
        run.reading = left > 0 and not run.cancel.cancelled
        return DraftReadEvent(run.draft_read, run.draft_read + left)

    def step(self, run: _Run) -> StepResult:
        """One step: choose k, draft, verify in one target pass, accept, roll back."""
        plan = self.plan_step(run)
        if plan is None:
            return StepResult([], None, True)
        with self._step_lock:
            if self._closed:
                run.end("cancelled", "cancel")
                return StepResult([], None, True)
            self.judge(run, plan, self.ctx.decode(plan.rows, logits="all" if plan.drafts else "last"))
        return self.settle(run, plan)

    def plan_step(self, run: _Run) -> StepPlan | None:
        """A step's first half: check the limits, choose k, draft. None: the run ended."""
        return steps_alone(self.planning(run, batched=False))

    def planning(self, run: _Run, *, batched: bool = True) -> "Steps[StepPlan | None]":
        """`plan_step` in steps: `batched`, the drafter proposes in steps (`proposing`), yielding
        the draft decodes it needs for the parallel slots to make with theirs; else `propose`."""
        ctx, drafter = self.ctx, self.drafter
        if run.cancel.cancelled or self._closed:
            run.end("cancelled", "cancel")
            return None
        room_ctx = ctx.n_ctx - ctx.n_past - 1  # batch = pending + k drafts
        remaining = run.request.max_tokens - len(run.generated)
        if room_ctx < 0 or remaining <= 0:
            run.end("length", "context_full" if room_ctx < 0 else "max_tokens")
            return None
        k_req = room = 0
        prop = offered = Proposal()
        asks = False  # this step asks the drafter for a proposal
        read_ev: DraftReadEvent | None = None
        if drafter is not None:
            room = 0 if run.step == 0 and run.lookahead.current.first_step_plain else min(room_ctx, remaining - 1)
            k_req, read_ev = yield from self._choosing(run, room, batched)
            if run.cancel.cancelled:
                run.end("cancelled", "cancel")
                return None
            asks = drafter.wants_proposal(k_req, room, run.lookahead.current)
        with self._step_lock:
            if self._closed:
                run.end("cancelled", "cancel")
                return None
            t_d0 = time.perf_counter()
            if asks:
                prop, offered, k_req = yield from self._proposing(run, k_req, room, batched)
            run.lookahead.record(len(prop.tokens))
            if prop.tokens:
                ctx.guard(1 + len(prop.tokens), len(prop.tokens))  # a recurrent state may have to come back
        return StepPlan(k_req, prop, offered, [run.pending] + prop.tokens, t_d0, time.perf_counter(), prop.tokens,
                        read=read_ev)

    def judge(self, run: _Run, plan: StepPlan, logits) -> None:
        """Verify the plan's rows (their `logits`, under the step lock), roll back the rejected tail."""
        plan.result, plan.verified_rows = run.verifier.verify(plan.drafts, plan.prop.dists, logits, run.context)
        plan.t_v1 = time.perf_counter()
        # Keep pending + accepted drafts in the KV; the final token becomes pending.
        self.ctx.truncate(self.ctx.n_past - len(plan.rows) + 1 + plan.result.accepted)

    def settle(self, run: _Run, plan: StepPlan) -> StepResult:
        """A step's second half: the verdict's costs, feedback, tokens and stats."""
        drafter, drafts, result, prop = self.drafter, plan.drafts, plan.result, plan.prop
        t_d0, t_d1, t_v1 = plan.t_d0, plan.t_d1, plan.t_v1
        drafting = plan.draft_s if plan.draft_s is not None else t_d1 - t_d0
        if not plan.pass_observed:
            self.cost.observe_verify(len(plan.rows), t_v1 - t_d1)
        if drafts:
            assert drafter is not None
            drafter.measure(self.cost, prop, result.accepted, drafting)
            drafter.feedback(len(drafts), result.accepted)
        if run.acceptance is not None:
            run.acceptance.observe_step(plan.offered, len(drafts), result.accepted, result.token)
        if drafts:  # who drafted: a free proposal beside a model draft (asked for the room) by its name
            beside = prop.asked is not None
            run.lookahead.feedback(len(drafts), result.accepted, prop.source if beside else drafter.kind, beside)  # type: ignore[union-attr]
        with self._step_lock:  # pieces and end-of-generation come from the target's vocabulary
            if self._closed:
                run.end("cancelled", "cancel")
                return StepResult([], None, True)
            tokens = self._emit(run, drafts[: result.accepted] + [result.token], result, bool(drafts), plan.verified_rows)
        if run.unread:  # not caught up: the draft has the new tokens to read too
            run.unread += run.emitted_this_step
        st = run.stats
        st.steps, st.drafted = st.steps + 1, st.drafted + len(drafts)
        used = min(result.accepted, run.used_this_step)  # not the drafts after EOS or a stop string
        st.accepted += used
        if drafts:
            src = prop.source or drafter.kind  # type: ignore[union-attr]
            st.accepted_by[src] = st.accepted_by.get(src, 0) + used
        st.draft_s, st.verify_s = st.draft_s + drafting, st.verify_s + t_v1 - t_d1
        ev = StepEvent(run.step, plan.k_req, len(drafts), result.accepted, run.emitted_this_step,
                       drafting * 1000.0, (t_v1 - t_d1) * 1000.0, time.perf_counter() - run.t0)
        run.pending = result.token
        run.step += 1
        return StepResult(tokens, ev, bool(run.finish), plan.read)

    def _choosing(self, run: _Run, room: int, batched: bool) -> "Steps[tuple[int, DraftReadEvent | None]]":
        """The step's k, as the policy chooses it (Auto weighs the model draft's reading of what
        it has not seen). A model draft that must read first catches up a chunk a step (about a
        target step's worth), those steps plain for it (free sources beside it may still propose)."""
        started = False
        k_req = 0
        if not run.reading:
            self.cost.draft_load_s = self.drafter.pending_load_s if self.drafter is not None else 0.0
            k_req = run.lookahead.choose(room, self.cost, run.unread)
            run.reading = started = k_req > 0 and run.unread > 0
        if not run.reading:
            return k_req, None
        limit = None if run.read_whole else self.cost.snapshot().read_chunk()
        run.read_whole = False
        read_ev = yield from self._reading_draft(run, limit, batched)
        return (k_req if started and not run.reading else 0), read_ev

    def _proposing(self, run: _Run, k_req: int, room: int, batched: bool) -> "Steps[tuple[Proposal, Proposal, int]]":
        """The drafter's proposal under the step's rules: (what is verified, what was offered,
        the k asked). A free drafter's offer may be longer than what is verified."""
        drafter = self.drafter
        assert drafter is not None
        policy, verifier = run.lookahead.current, run.verifier
        rules = DraftContext(policy.draft_gate(self.cost) if drafter.cost_class == "model" else None,
                             policy.trims_proposals, verifier.row_processor, verifier.grammar, policy, self.cost, room)
        try:
            if batched:
                prop = yield from drafter.proposing(run.context, k_req, verifier.sampler, rules)
            else:
                prop = drafter.propose(run.context, k_req, verifier.sampler, rules)
        except NonFiniteLogits as e:  # say which model: the draft's file is the damaged one
            raise NonFiniteLogits.found(e.kind, model_label(drafter.model, "draft model")) from None
        if prop.asked is None:
            return prop.cut(policy.verify_count(prop, k_req, self.cost, run.acceptance)), prop, k_req
        # Its source was asked for more (a free companion for all it had, up to `room`, hundreds of
        # tokens): the step's k is what Auto chose of it to verify (a 0..16 readout showed 498).
        verified = prop.cut(policy.verify_count(prop, prop.asked, self.cost, run.acceptance))
        return verified, prop, len(verified.tokens)

    def _emit(self, run: _Run, new_tokens: list[int], result, drafted: bool, rows=None) -> list[TokenEvent]:
        """Append accepted tokens to the output, with provenance, stop and EOS handling
        (and, when `rows` are given, each token's log-probability from its verify row)."""
        provs = ["draft"] * result.accepted + ["target" if result.corrected else "bonus"] if drafted else ["plain"]
        out: list[TokenEvent] = []
        now = time.perf_counter()
        run.emitted_this_step = run.used_this_step = 0
        for j, (tok, prov) in enumerate(zip(new_tokens, provs)):
            run.used_this_step = j + 1
            if self.target.is_eog(tok):
                run.end("stop", "eos")
                break
            if rows is not None:
                run.logprobs.append(run.verifier.token_logprobs(rows[j], tok))
            run.generated.append(tok)
            run.provenance.append(prov)
            run.context.append(tok)
            run.counts[prov] += 1
            run.emitted_this_step += 1
            if run.first_token_t is None:
                run.first_token_t = now
            for idx, piece in run.text.add(len(run.generated) - 1, self.target.piece(tok)):
                out.append(self._token_event(run, idx, piece, now))
            if run.text.stopped:
                run.end("stop", "stop_string")
                break
            if len(run.generated) >= run.request.max_tokens:
                run.end("length", "max_tokens")
                break
        return out

    @staticmethod
    def _token_event(run: _Run, idx: int, piece: str, now: float) -> TokenEvent:
        lp, top = run.logprobs[idx] if idx < len(run.logprobs) else (None, None)
        return TokenEvent(piece, run.generated[idx], run.provenance[idx], idx, run.step, now - run.t0,  # type: ignore[arg-type]
                          logprob=lp, top_logprobs=top)

    def _done(self, run: _Run) -> tuple[list[TokenEvent], DoneEvent]:
        flush = () if run.text.stopped else run.text.flush()
        tokens = [self._token_event(run, idx, piece, time.perf_counter()) for idx, piece in flush]
        t_end = time.perf_counter()
        st = run.stats
        st.generated_tokens = len(run.generated)
        st.finish_reason, st.stopped_by = run.finish, run.stopped_by
        run.t_prefill = run.t_prefill or t_end
        st.prefill_s = st.prefill_s or run.t_prefill - run.t0
        st.decode_s = t_end - run.t_prefill
        st.wall_s = t_end - run.t0
        st.time_to_first_token_s = (run.first_token_t - run.t0) if run.first_token_t is not None else 0.0
        st.provenance_counts = run.counts
        st.lookahead = run.lookahead.summary() if self.drafter is not None else "0"  # nothing to draft with
        st.k_counts = {str(k): n for k, n in sorted(run.lookahead.k_counts.items())}
        st.set_aside = run.lookahead.set_aside()
        if self.drafter is not None and run.generated:
            self.drafter.finish(run.prompt, run.generated)  # after t_end: learning is not decoding
        return tokens, DoneEvent(run.text.text, run.generated, st.finalize())
