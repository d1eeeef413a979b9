"""The answer core: one request of any API, from its checks to neutral events.

Every API reads its own body and translates it into the chat or text request of `schemas`
(as llama.cpp's server turns every API into one task). The core checks that request,
takes its place in the queue, renders and tokenises each prompt once, builds the
`GenerationRequest` from those token ids, runs it (`bridge.Generation`) and hands back
what happened as neutral events: `Read` (the prompt is read), `Text`, `CallStart`,
`CallArgs`, then `End` or `Failed`; or, for a whole answer, one `Whole`. Each API in
`apis/` writes these in its own wire form: nothing re-reads another API's output. This is
the seam a scheduler of several requests at once takes over.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Sequence, TypeVar, Union

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from ...decoding.drafting.choice import DraftChoice
from ...decoding.events import DoneEvent, PrefillEvent, TokenEvent
from ...decoding.queue import GenerationQueue, Job, QueueFull
from ...decoding.request import GenerationRequest
from ...errors import PromptTooLong, TandemError
from ...llamacpp.rpc_backend import RpcError
from ...toolcalls.tool_calls import ParsedAnswer, ToolCall
from .bridge import Generation, GenerationFailed
from .config import ServedModel, ServerConfig, checked_pictures, model_not_found, slot_draft_spec
from .errors import ApiError, engine_error, failure
from ...decoding.prompting.fim_layout import infill_tokens
from .fim import fim_tokens_or_400
from .wire import Outcome, finish_reason
from .prom import ServerMetrics
from .schemas import ChatCompletionRequest, CompletionRequest
from .tool_use import ToolUse, grammar_vocab

OpenAIRequest = Union[ChatCompletionRequest, CompletionRequest]
T = TypeVar("T")
SHUTDOWN_GRACE_S = 2.0  # under uvicorn's 3 s graceful-shutdown timeout (runner.py)


def shutdown_error() -> ApiError:
    return ApiError(503, "the server is stopping: this answer was cut short", type="server_error", code="server_shutdown")


def cancelled_error(stopping: threading.Event) -> ApiError:
    """The answer to a generation that ended cancelled while its client still waited: never a
    quiet end or a 'stop' (a client would take a cut answer for a whole one)."""
    if stopping.is_set():
        return shutdown_error()
    return ApiError(503, "the generation was cancelled before it finished; nothing more will come: send the "
                         "request again", type="server_error", code="cancelled")


# -- neutral events ---------------------------------------------------------------------------
@dataclass
class Read:
    """The prompt is read (or the answer began): a stream may send its first chunk now."""


@dataclass
class Text:
    """A piece of the answer's text. `tokens`: the tokens not reported yet (they ride on the
    first event of the piece of output they wrote, for provenance and log-probabilities);
    `offset`: the answer's text before this piece, in characters."""

    text: str
    tokens: list[TokenEvent] = field(default_factory=list)
    offset: int = 0


@dataclass
class CallStart:
    """A tool call begins: its position among the answer's calls, its id and function name."""

    index: int
    id: str
    name: str
    tokens: list[TokenEvent] = field(default_factory=list)
    offset: int = 0


@dataclass
class CallArgs:
    """A piece of a tool call's arguments (JSON text)."""

    index: int
    text: str
    tokens: list[TokenEvent] = field(default_factory=list)
    offset: int = 0


@dataclass
class End:
    """The answer is complete. `finish`: OpenAI's finish reason ('stop', 'length',
    'tool_calls'); `tokens`: tokens that wrote nothing to send (a call's closing tag)."""

    outcome: Outcome
    finish: str
    done: DoneEvent
    tokens: list[TokenEvent] = field(default_factory=list)
    offset: int = 0


@dataclass
class Failed:
    """The generation failed or was cut short after it began: the error to tell the client."""

    error: ApiError

    @property
    def message(self) -> str:
        return self.error.message

    @property
    def type(self) -> str:
        return self.error.type

    @property
    def code(self) -> str | None:
        return self.error.code


Event = Union[Read, Text, CallStart, CallArgs, End, Failed]


@dataclass(frozen=True)
class Controls:
    """A request's checked draft and logit controls and its grammar (`GenerationRequest` keywords)."""

    draft: Any
    bias: dict[int, float] | None
    penalties: Any
    constraint: dict[str, Any]
    lookahead: Any


@dataclass
class Whole:
    """A whole answer: its text besides the tool calls, the calls, the finish reason, what the
    generation reports, and its tokens."""

    text: str
    calls: tuple[ToolCall, ...]
    finish: str
    outcome: Outcome
    tokens: list[TokenEvent]

    @property
    def content(self) -> str | None:
        """The text as an answer with calls shows it: None when it is only blank space."""
        return self.text if self.text.strip() or not self.calls else None


# -- the core ---------------------------------------------------------------------------------
class AnswerCore:
    """One served engine's answers: the checks before a request queues, its prompt read once,
    and its run as neutral events."""

    def __init__(self, served: ServedModel, config: ServerConfig, queue: GenerationQueue, metrics: ServerMetrics,
                 stopping: threading.Event | None = None, slots: Any = None):
        self.served, self.config, self.queue, self.metrics = served, config, queue, metrics
        self.slots = slots  # the parallel slots answers run in (config.py; None: one at a time)
        self.eng = served.engine
        self.stopping = stopping or threading.Event()

    def check_model(self, name: str | None) -> None:
        if not name or name in self.served.names() or self.config.any_model_name:
            return
        raise model_not_found(name, self.served, self.config)

    def draft_spec(self, choice: str | None) -> Any:
        choice = choice or self.served.default_draft
        if choice == "model":
            if not self.served.has_draft_model:
                raise ApiError(400, "draft 'model': this server was started without a draft model; "
                                    "use 'lookup', 'suffix' or 'none'", param="draft", code="invalid_value")
            return "model" if self.slots is not None else self.served.draft
        if choice == "mtp" and not getattr(self.eng.target, "n_nextn", 0):
            raise ApiError(400, f"draft 'mtp': {Path(self.eng.target.path).name} has no MTP layers; "
                                "use 'lookup' or 'none'", param="draft", code="invalid_value")
        if self.slots is not None:  # one of the drafts the slots run, or a 400 saying which they are
            return slot_draft_spec(choice, self.config.parallel, self.slots.drafts)
        return DraftChoice.parse(choice).spec  # "lookup", "mtp", "suffix" or "none", checked by the request's schema

    def logit_controls(self, req: Any) -> tuple[dict[int, float] | None, Any]:
        """The request's logit bias (ids checked against the vocabulary) and penalties, or a 400."""
        try:
            penalties = req.penalties()
        except TandemError as e:
            raise ApiError(400, str(e), code="invalid_value")
        bias = req.token_bias
        n_vocab = self.eng.target.n_vocab
        bad = [t for t in bias or () if t >= n_vocab]
        if bad:
            raise ApiError(400, f"logit_bias: token id {bad[0]} is outside the vocabulary (0..{n_vocab - 1})",
                           param="logit_bias", code="invalid_value")
        return bias, penalties

    @staticmethod
    def constraint(req: Any) -> dict[str, Any]:
        """The request's grammar or JSON schema, checked here (a 400 naming the field), as
        `GenerationRequest` keywords."""
        try:
            which = req.constraint()
        except ValueError as e:
            raise ApiError(400, str(e), param="response_format", code="invalid_value")
        if which is None:
            return {}
        from ...decoding.sampling.grammar import GrammarError, check_grammar, json_schema_grammar  # lazily: llama.cpp

        field_name, value = which
        param = field_name if getattr(req, field_name, None) is not None else "response_format"
        try:
            if field_name == "grammar":
                check_grammar(value)
            else:
                value = json_schema_grammar(value, param)  # compiled once here; the request gets the GBNF
        except GrammarError as e:  # the message begins with `param`: renamed by the APIs that call it otherwise
            raise ApiError(400, str(e), param=param, code="invalid_value")
        return {"grammar": value}

    def piece(self, token: int) -> bytes:
        return self.eng.target.piece(token)

    def admit(self, kind: str, request_id: str, *, own_context: bool = False) -> Job:
        """A place in the queue's limit before its prompt is counted (counting costs CPU); own_context: needs no slot."""
        try:
            return self.queue.submit("server", ready=False, side_by_side=self.slots is not None, beside=own_context,
                                     endpoint=kind, request_id=request_id, model=self.served.id)
        except QueueFull as e:
            raise ApiError(503, str(e), type="server_error", code="queue_full",
                           headers={"Retry-After": str(e.retry_after_s)})

    async def prompt_tokens(self, prompt: Any, chat: bool, tools: Any = None, parse_special: bool = False,
                            suffix: str | None = None, media: bool = False) -> list[int]:
        """The prompt's tokens (with the tools offered), counted only as far as the context
        holds (a 400 beyond it); `parse_special`: control-token text in messages is markup;
        `suffix`: the prompt is the prefix of a fill-in-the-middle prompt."""
        eng = self.eng
        param = "messages" if chat else "prompt"
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            bad = next((t for t in prompt if t >= eng.target.n_vocab), None)
            if bad is not None:
                raise ApiError(400, f"prompt: token id {bad} is outside the vocabulary (0..{eng.target.n_vocab - 1})",
                               param=param, code="invalid_value")
        try:
            if suffix is not None:
                fim = fim_tokens_or_400(eng.target, "suffix")
                tokens = await run_in_threadpool(infill_tokens, eng.target, fim, prompt, suffix, n_ctx=eng.n_ctx)
            else:
                tokens = await run_in_threadpool(eng.tokens_for, prompt, chat=chat, limit=eng.n_ctx, tools=tools,
                                                 parse_special=parse_special, media=media)
        except RpcError as e:  # the split target's worker is gone: the server's trouble, not the request's
            raise failure(GenerationFailed(str(e), user=False, lost_worker=True), self.served)
        except PromptTooLong as e:
            raise ApiError(400, f"the prompt is at least {e.at_least:,} tokens but the context holds {eng.n_ctx}: "
                                "shorten it, or start the server with a larger --ctx", param=param,
                           code="context_length_exceeded")
        except TandemError as e:
            raise engine_error(e, self.served, param=param)
        n = len(tokens)
        if n >= eng.n_ctx:
            raise ApiError(400, f"the prompt is {n} tokens but the context holds {eng.n_ctx}: shorten it, "
                                "or start the server with a larger --ctx", param=param, code="context_length_exceeded")
        return tokens

    async def count(self, req: ChatCompletionRequest) -> int:
        """The prompt tokens of a chat request as it would be rendered (with its tools), counted
        in a place of the queue's limit as a generation counts them."""
        tools = ToolUse(req, self.eng.target.chat_template)
        job = self.admit("count_tokens", uuid.uuid4().hex[:24])
        try:  # a picture counts its image tokens: the prompt as the engine will read it
            images = checked_pictures(self.eng, req.images())
            tokens = await self.prompt_tokens(req.engine_messages(), True, tools.tools, req.parse_special_in_content,
                                              None, bool(images))
            return len(tokens if not images else (await run_in_threadpool(
                self.eng.prompt_input, GenerationRequest(tokens, images=images)))[0])
        finally:
            self.queue.finish(job)

    def controls(self, req: Any) -> "Controls":
        """The draft, logit and constraint fields every API's request shares, checked (a 400
        naming what is wrong) before the request takes a place in the queue."""
        draft = self.draft_spec(req.draft)
        bias, penalties = self.logit_controls(req)
        lookahead = req.lookahead if req.lookahead is not None else self.served.lookahead
        return Controls(draft, bias, penalties, self.constraint(req), lookahead if draft is not None else 0)

    def generation_request(self, req: Any, controls: "Controls", tokens: list[int], max_tokens: int, *,
                           chat: bool = False, parse_special: bool = False,
                           logprobs: int | None = None, images: Sequence[Any] = ()) -> GenerationRequest:
        """The request the engine runs for these prompt tokens (a 400 for what it gets wrong)."""
        try:
            return GenerationRequest.from_options(
                tokens, draft_model=controls.draft, lookahead=controls.lookahead, max_tokens=max_tokens,
                temperature=self.config.temperature if req.temperature is None else req.temperature,
                top_p=1.0 if req.top_p is None else req.top_p, top_k=req.top_k or 0, min_p=req.min_p or 0.0,
                seed=req.seed, stop=req.stop_list, chat=chat, tag="server", logit_bias=controls.bias,
                penalties=controls.penalties, logprobs=logprobs, parse_special=parse_special, images=images,
                **controls.constraint)
        except TandemError as e:
            raise engine_error(e, self.served)

    async def begin(self, req: OpenAIRequest) -> "Answering":
        """Check a chat or text request, queue it, and read its prompts once: its answers are
        then started choice by choice (`Answering`). ApiError when it is refused."""
        self.check_model(req.model)
        chat = isinstance(req, ChatCompletionRequest)
        prompts: list[Any] = [req.engine_messages()] if chat else req.prompt
        suffix = None if chat else getattr(req, "suffix", None) or None  # "": no suffix
        tools = ToolUse(req, self.eng.target.chat_template, grammar_vocab(self.eng.target)) if chat else None
        controls = self.controls(req)
        images = checked_pictures(self.eng, req.images()) if chat else ()
        parse_special = req.parse_special_in_content if chat else req.prompt_is_markup
        kind = "chat" if chat else "text"
        request_id = uuid.uuid4().hex[:24]
        job = self.admit(kind, request_id)
        try:
            token_lists = [await self.prompt_tokens(p, chat, tools.tools if tools else None, parse_special, suffix,
                                                    bool(images)) for p in prompts]
            bases = []
            for tokens in token_lists:
                limit = req.token_limit or max(1, self.eng.n_ctx - len(tokens))
                base = self.generation_request(req, controls, tokens, limit, chat=chat, images=images,
                                               parse_special=parse_special, logprobs=req.logprobs_top)
                try:
                    bases.append(tools.constrain(base) if tools else base)
                except TandemError as e:
                    raise engine_error(e, self.served)
        except BaseException:
            self.queue.finish(job)
            raise
        self.queue.ready(job)
        return Answering(self, job, kind, request_id, bases, [len(t) for t in token_lists], req.n or 1, tools,
                         req.seed)

    def answering(self, job: Job, kind: str, request_id: str, request: GenerationRequest) -> "Answering":
        """One admitted request that another door built (`/infill`), ready to run."""
        self.queue.ready(job)
        return Answering(self, job, kind, request_id, [request], [len(request.prompt)], 1, None, None)


class Answering:
    """One admitted request whose prompts are read: its choices (`per_prompt` answers to each
    prompt, one after another), each run as events or whole."""

    def __init__(self, core: AnswerCore, job: Job, kind: str, request_id: str, bases: list[GenerationRequest],
                 prompt_sizes: list[int], per_prompt: int, tools: ToolUse | None, seed: int | None):
        self.core, self.job, self.kind, self.request_id, self.seed = core, job, kind, request_id, seed
        self.bases, self.prompt_sizes, self.per_prompt, self.tools = bases, prompt_sizes, per_prompt, tools
        self.count = len(bases) * per_prompt
        # The first choice starts now, before any response is sent: its job is in line, and a
        # job in line that no worker runs would hold every later request back for good (a
        # stream whose client left before it began is never iterated).
        self.first = self._start(0)

    def choice(self, i: int) -> "Choice":
        """Choice i (prompt i // per_prompt, its answer i % per_prompt), started: the first holds
        the admitted place, the others queue behind it unbounded (the request was admitted);
        seed s gives a prompt's answer j seed s + j."""
        return self.first if i == 0 else self._start(i)

    def _start(self, i: int) -> "Choice":
        c = self.core
        job = self.job if i == 0 else c.queue.submit("server", bounded=False, side_by_side=c.slots is not None,
                                                      endpoint=self.kind, request_id=self.request_id, model=c.served.id)
        base, j = self.bases[i // self.per_prompt], i % self.per_prompt
        seed = None if self.seed is None else (self.seed + j) % (2**64)
        request = base if j == 0 else base.with_(sampling=replace(base.sampling, seed=seed))
        gen = Generation(c.queue, job, c.eng, request, observe=c.metrics.observe, cancelled=c.metrics.cancelled.inc,
                         slots=c.slots)
        return Choice(self, gen.start())


class Choice:
    """One running answer: its events as they come (`events`), or the whole of it (`whole`)."""

    def __init__(self, answering: Answering, gen: Generation):
        self.answering, self.gen, self.core, self.ended_by_door = answering, gen, answering.core, False

    @property
    def prompt_evaluated(self) -> int:
        return self.gen.prompt_evaluated

    def cancel(self) -> None:
        """Stop the generation at its next step (its client is gone)."""
        self.gen.cancel()

    def end_here(self) -> None:
        """The door ends the answer itself (an editor's cut): its end is an `End`, not a failure."""
        self.ended_by_door = True
        self.gen.cancel()

    async def events(self) -> AsyncIterator[Event]:
        """`Read` once the generation begins, then the answer as text and tool-call pieces (with
        tools, a free answer's text that could still start a call is held until decided), then
        `End`; `Failed` when it fails or is cancelled before its end. Closing the iterator
        cancels the generation."""
        split = self.answering.tools.stream() if self.answering.tools else None
        pending: list[TokenEvent] = []  # tokens not reported yet
        offset, fed, read, ended = 0, 0, False, False
        try:
            async for ev in self.gen:
                if not read:
                    read = True
                    yield Read()
                if isinstance(ev, PrefillEvent):
                    continue
                if isinstance(ev, TokenEvent):
                    pending.append(ev)
                    if not ev.text:
                        continue
                    text = "".join(t.text for t in pending[fed:])
                    ids = [t.token_id for t in pending[fed:]]
                    fed = len(pending)
                    text = split.feed(text, ids) if split else text
                    group = _group(text, split.deltas() if split else [], pending, offset)
                    for out in group:
                        yield out
                    if group:
                        offset += len(text)
                        pending, fed = [], 0
                elif ev.stats.finish_reason != "cancelled" or self.ended_by_door:
                    ended = True
                    group: list[Any] = []
                    calls: tuple = ()
                    if split is not None:
                        rest, calls = split.finish()
                        group = _group(rest, split.deltas(), pending, offset)
                    for out in group:
                        yield out
                    tool_calls = bool(calls) and not split.cut_short
                    yield End(Outcome(ev.stats, self.gen.prompt_evaluated),
                              "tool_calls" if tool_calls else finish_reason(ev.stats), ev,
                              [] if group else pending, offset)
            if not ended:  # cancelled: by a shutdown, or before its turn or its end
                yield Failed(cancelled_error(self.core.stopping))
        except GenerationFailed as e:
            yield Failed(failure(e, self.core.served))
        finally:
            self.gen.cancel()  # a client that went away stops its generation at the next step

    async def watched(self, request: Request, work: Awaitable[T]) -> T:
        """`work`'s result; a client that goes away meanwhile cancels the generation."""
        task = asyncio.ensure_future(work)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=0.25)
                if not task.done() and await request.is_disconnected():
                    self.gen.cancel()  # nobody will read the answer: stop at the next step
            return task.result()
        finally:
            self.gen.cancel()

    async def whole(self, request: Request) -> Whole:
        """The whole answer; a client that goes away cancels the generation. ApiError when it
        fails or is cancelled."""
        tokens: list[TokenEvent] = []
        done: list[DoneEvent] = []

        async def drain() -> None:
            async for ev in self.gen:
                if isinstance(ev, TokenEvent):
                    tokens.append(ev)
                elif isinstance(ev, DoneEvent):
                    done.append(ev)

        try:
            await self.watched(request, drain())
        except GenerationFailed as e:
            raise failure(e, self.core.served)
        if not done or done[0].stats.finish_reason == "cancelled":
            raise cancelled_error(self.core.stopping)
        d = done[0]
        tools = self.answering.tools
        parsed = tools.answer(d.text, d.tokens) if tools else ParsedAnswer(d.text)
        outcome = Outcome(d.stats, self.gen.prompt_evaluated)
        finish = "tool_calls" if parsed.calls and not parsed.cut_short else finish_reason(d.stats)  # (a forced call cut short: not)
        return Whole(parsed.content, parsed.calls, finish, outcome, tokens)


def _group(text: str, items: Sequence[dict[str, Any]], tokens: list[TokenEvent], offset: int) -> list[Any]:
    """The events for what can go out now: the text, then the tool-call pieces; the tokens not
    reported yet ride on the first of them."""
    out: list[Any] = [Text(text, offset=offset)] if text else []
    for it in items:
        fn = it.get("function") or {}
        if "id" in it:
            out.append(CallStart(it["index"], it["id"], fn.get("name", ""), offset=offset))
        else:
            out.append(CallArgs(it["index"], fn.get("arguments", ""), offset=offset))
    if out:
        out[0].tokens = list(tokens)
    return out
