"""`POST /v1/chat/completions` and `/v1/completions`: check the request, take a place in the
engine's queue, and answer with one body or a stream of chunks. A text completion may hold
several prompts (texts or token ids): their choices come in order, `n` per prompt; with
`suffix`, each prompt is a prefix and the model fills in the middle (its FIM tokens)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Union

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from ...errors import PromptTooLong, TandemError
from ...llamacpp.rpc_backend import RpcError
from ...decoding.drafting.choice import DraftChoice
from ...decoding.events import DoneEvent, PrefillEvent, TokenEvent
from ...decoding.queue import GenerationQueue, Job, QueueFull
from ...decoding.request import GenerationRequest
from . import wire
from .bridge import Generation, GenerationFailed
from .config import ServedModel, ServerConfig
from .errors import ApiError, engine_error, failure
from .fim import fim_tokens_or_400, infill_tokens
from .listing import model_not_found
from .prom import ServerMetrics
from .schemas import ChatCompletionRequest, CompletionRequest
from .tool_use import ToolUse, grammar_vocab
from ..tools.auto_calls import AutoCallStream
from ..tools.forced_calls import ForcedCallStream
from ..tools.tool_calls import ParsedAnswer, ToolCallStream


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


class Completions:
    """One served engine's generation endpoints: the checks before a request queues, and its answer."""

    def __init__(self, served: ServedModel, config: ServerConfig, queue: GenerationQueue, metrics: ServerMetrics,
                 stopping: threading.Event | None = None):
        self.served, self.config, self.queue, self.metrics = served, config, queue, metrics
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
            return self.served.draft
        if choice == "mtp" and not getattr(self.eng.target, "n_nextn", 0):
            raise ApiError(400, f"draft 'mtp': {Path(self.eng.target.path).name} has no MTP layers; "
                                "use 'lookup' or 'none'", param="draft", code="invalid_value")
        return DraftChoice.parse(choice).spec  # "lookup", "mtp", "suffix" or "none", checked by the request's schema

    async def prompt_tokens(self, prompt: Any, chat: bool, tools: Any = None, parse_special: bool = False,
                            suffix: str | None = None) -> list[int]:
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
                                                 parse_special=parse_special)
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

    def admit(self, kind: str, request_id: str) -> Job:
        """A place in the queue's limit before the prompt is counted (counting costs CPU too)."""
        try:
            return self.queue.submit("server", ready=False, endpoint=kind, request_id=request_id, model=self.served.id)
        except QueueFull as e:
            raise ApiError(503, str(e), type="server_error", code="queue_full",
                           headers={"Retry-After": str(e.retry_after_s)})

    async def generate(self, request: Request, req: Union[ChatCompletionRequest, CompletionRequest], kind: str) -> Response:
        self.check_model(req.model)
        eng, chat = self.eng, kind == "chat"
        prompts: list[Any] = [req.engine_messages()] if isinstance(req, ChatCompletionRequest) else req.prompt
        suffix = None if chat else getattr(req, "suffix", None) or None  # "": no suffix
        tools = ToolUse(req, eng.target.chat_template, grammar_vocab(eng.target)) \
            if isinstance(req, ChatCompletionRequest) else None
        draft = self.draft_spec(req.draft)
        parse_special = req.parse_special_in_content if isinstance(req, ChatCompletionRequest) else req.prompt_is_markup
        bias, penalties = self.logit_controls(req)
        constraint = self.constraint(req)
        request_id = uuid.uuid4().hex[:24]
        job = self.admit(kind, request_id)
        try:
            token_lists = [await self.prompt_tokens(p, chat, tools.tools if tools else None, parse_special, suffix)
                           for p in prompts]
        except BaseException:
            self.queue.finish(job)
            raise
        self.queue.ready(job)
        lookahead = req.lookahead if req.lookahead is not None else self.served.lookahead
        bases = []
        for prompt, tokens in zip(prompts, token_lists):
            limit = req.token_limit or max(1, eng.n_ctx - len(tokens))
            if (tools and tools.active) or suffix is not None:
                prompt = tokens  # rendered with the tools or FIM tokens: the engine takes them as they are
            try:  # the one request the engine runs, built here at the edge and passed down as is
                base = GenerationRequest.from_options(
                    prompt, draft_model=draft, lookahead=lookahead if draft is not None else 0, max_tokens=limit,
                    temperature=self.config.temperature if req.temperature is None else req.temperature,
                    top_p=1.0 if req.top_p is None else req.top_p, top_k=req.top_k or 0, min_p=req.min_p or 0.0,
                    seed=req.seed, stop=req.stop_list, chat=chat, tag="server", logit_bias=bias,
                    penalties=penalties, logprobs=req.logprobs_top, parse_special=parse_special, **constraint)
                bases.append(tools.constrain(base) if tools else base)
            except TandemError as e:
                self.queue.finish(job)
                raise engine_error(e, self.served)
        shape = wire.Shape(kind, request_id, self.served.id)
        n = req.n or 1

        def start(i: int) -> Generation:
            """Choice i (prompt i // n, its answer i % n), one after another: the first holds the
            admitted place, the others queue behind it unbounded (the request was admitted);
            seed s gives a prompt's answer j seed s + j."""
            nth = job if i == 0 else self.queue.submit("server", bounded=False, endpoint=kind,
                                                        request_id=request_id, model=self.served.id)
            base, j = bases[i // n], i % n
            seed = None if req.seed is None else (req.seed + j) % (2**64)
            choice = base if j == 0 else base.with_(sampling=replace(base.sampling, seed=seed))
            return Generation(self.queue, nth, eng, choice, observe=self.metrics.observe,
                              cancelled=self.metrics.cancelled.inc).start()

        first = start(0)
        if req.stream:
            # On shutdown, sse-starlette waits up to the grace period for the stream to end by
            # itself (the runner has cancelled the generation: it ends with an error chunk).
            return EventSourceResponse(self.stream(first, start, shape, req, tools, len(bases) * n), sep="\n",
                                       shutdown_grace_period=SHUTDOWN_GRACE_S)
        choices, outcomes = [], []
        for i in range(len(bases) * n):
            gen = first if i == 0 else start(i)
            done, tokens = await self.complete(request, gen)
            outcome = wire.Outcome(done.stats, gen.prompt_evaluated)
            answer = tools.answer(done.text, done.tokens) if tools else ParsedAnswer(done.text)
            cut = wire.finish_reason(done.stats) if answer.cut_short else None  # a forced call cut short
            choices.append(shape.choice(i, answer.content, outcome, tokens if req.provenance else None,
                                        shape.logprobs(tokens, self.piece), finish=cut, tool_calls=answer.calls))
            outcomes.append(outcome)
        return JSONResponse(shape.full(choices, outcomes, per_prompt=n))

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

        field, value = which
        param = field if getattr(req, field, None) is not None else "response_format"
        try:
            if field == "grammar":
                check_grammar(value)
            else:
                value = json_schema_grammar(value, param)  # compiled once here; the request gets the GBNF
        except GrammarError as e:  # the message begins with `param`: renamed by the APIs that call it otherwise
            raise ApiError(400, str(e), param=param, code="invalid_value")
        return {"grammar": value}

    def piece(self, token: int) -> bytes:
        return self.eng.target.piece(token)

    async def complete(self, request: Request, gen: Generation) -> tuple[DoneEvent, list[TokenEvent]]:
        """One whole choice; a client that goes away cancels the generation."""
        tokens: list[TokenEvent] = []
        done: list[DoneEvent] = []

        async def drain() -> None:
            async for ev in gen:
                if isinstance(ev, TokenEvent):
                    tokens.append(ev)
                elif isinstance(ev, DoneEvent):
                    done.append(ev)

        task = asyncio.ensure_future(drain())
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=0.25)
                if not task.done() and await request.is_disconnected():
                    gen.cancel()  # nobody will read the answer: stop at the next step
            task.result()
        except GenerationFailed as e:
            raise failure(e, self.served)
        finally:
            gen.cancel()
        if not done or done[0].stats.finish_reason == "cancelled":
            raise cancelled_error(self.stopping)
        return done[0], tokens

    async def stream(self, first: Generation, start: Callable[[int], Generation], shape: wire.Shape, req: Any,
                     tools: ToolUse | None = None, count: int = 1):
        """Server-sent chunks as tokens arrive, choice after choice; a failure or a shutdown ends
        the stream with an error chunk. The usage chunk (when asked) adds up every choice."""
        gen = first
        outcomes: list[wire.Outcome] = []
        try:
            for i in range(count):
                gen = first if i == 0 else start(i)
                split = tools.stream() if tools else None
                async for data in self.stream_choice(gen, i, shape, req, outcomes, split):
                    yield {"data": data}
                if len(outcomes) <= i:  # cancelled: by a shutdown, or before its turn or its end
                    yield {"data": wire.dumps(cancelled_error(self.stopping).body)}
                    return
            if req.include_usage and outcomes:
                yield {"data": wire.dumps(shape.usage_chunk(outcomes, per_prompt=req.n or 1))}
            yield {"data": "[DONE]"}
        except GenerationFailed as e:
            yield {"data": wire.dumps(failure(e, self.served).body)}
        finally:
            gen.cancel()  # a client that went away stops its generation at the next step

    async def stream_choice(self, gen: Generation, index: int, shape: wire.Shape, req: Any,
                            outcomes: list[wire.Outcome],
                            split: ToolCallStream | ForcedCallStream | AutoCallStream | None = None):
        """One choice's chunks. A chat stream's first chunk (the role) goes out once the prompt
        is read, so a client timing it measures prompt processing (`--early-role-chunk`: at once).
        With tools (`split`), a free answer's text that could still start a tool call is held
        until it is decided; a call the grammar holds (forced, or begun under 'auto') goes out
        as `delta.tool_calls` chunks as it is written, its header then its argument pieces; a
        free call in another form once it is complete and checked."""
        role_sent = not shape.chat
        if not role_sent and self.config.early_role_chunk:
            yield wire.dumps(shape.chunk("", role=True, index=index))
            role_sent = True
        pending: list[TokenEvent] = []  # tokens not sent yet (split characters, or held for a tool call)
        offset, fed = 0, 0
        async for ev in gen:
            if not role_sent:
                yield wire.dumps(shape.chunk("", role=True, index=index))
                role_sent = True
            if isinstance(ev, PrefillEvent):
                continue
            if isinstance(ev, TokenEvent):
                pending.append(ev)
                if ev.text:
                    text = "".join(t.text for t in pending[fed:])
                    ids = [t.token_id for t in pending[fed:]]
                    fed = len(pending)
                    text = split.feed(text, ids) if split else text
                    bodies = self.piece_chunks(shape, index, req, text, split.deltas() if split else [], pending, offset)
                    for body in bodies:
                        yield wire.dumps(body)
                    if bodies:
                        offset += len(text)
                        pending, fed = [], 0
            elif ev.stats.finish_reason != "cancelled":  # a cancelled one ends with `cancelled_error`
                outcome = wire.Outcome(ev.stats, gen.prompt_evaluated)
                outcomes.append(outcome)
                calls: tuple = ()
                bodies: list[dict[str, Any]] = []
                if split is not None:
                    rest, calls = split.finish()
                    bodies = self.piece_chunks(shape, index, req, rest, split.deltas(), pending, offset)
                final = shape.final_chunk(outcome, index, tool_calls=bool(calls) and not split.cut_short)
                if pending and not bodies:  # tokens that wrote nothing to send (a call's closing tag)
                    self.attach(final, req, shape, pending, offset)
                for body in bodies + [final]:
                    yield wire.dumps(body)

    def piece_chunks(self, shape: wire.Shape, index: int, req: Any, text: str, items: list[dict[str, Any]],
                     tokens: list[TokenEvent], offset: int) -> list[dict[str, Any]]:
        """The chunks for what can go out now: text, then `delta.tool_calls` items; the tokens
        not sent yet ride (provenance, log-probabilities) on the first of them."""
        bodies = ([shape.chunk(text, index=index)] if text else []) + [shape.tool_call_chunk(it, index) for it in items]
        if bodies and tokens:
            self.attach(bodies[0], req, shape, tokens, offset)
        return bodies

    def attach(self, body: dict[str, Any], req: Any, shape: wire.Shape, tokens: list[TokenEvent], offset: int) -> None:
        """Put these tokens' log-probabilities (and provenance, when asked) on a chunk."""
        choice = body["choices"][0]
        choice["logprobs"] = shape.logprobs(tokens, self.piece, offset)
        if req.provenance:
            choice["provenance"] = wire.provenance_items(tokens)


def completions_router(completions: Completions, check_key: Callable[..., Any]) -> APIRouter:
    """The two generation endpoints (with their unversioned aliases), behind the key check."""
    router = APIRouter(dependencies=[Depends(check_key)])

    @router.post("/v1/chat/completions")
    @router.post("/chat/completions", include_in_schema=False)
    async def chat_completions(request: Request, body: ChatCompletionRequest) -> Response:
        return await completions.generate(request, body, "chat")

    @router.post("/v1/completions")
    @router.post("/completions", include_in_schema=False)
    async def text_completions(request: Request, body: CompletionRequest) -> Response:
        return await completions.generate(request, body, "text")

    return router
