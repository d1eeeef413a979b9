"""`POST /v1/chat/completions` and `/v1/completions`: OpenAI's bodies and chunks, written from
the answer core's events. A text completion may hold several prompts (texts or token ids):
their choices come in order, `n` per prompt; with `suffix`, each prompt is a prefix and the
model fills in the middle (its FIM tokens). With `tandem serve --library`, a chat request that
sets `"library": true` is answered from the folder and carries its `sources` (library.py)."""

from __future__ import annotations

from typing import Any, Callable, Union

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import EventSourceResponse

from ....decoding.events import TokenEvent
from ..answer import (SHUTDOWN_GRACE_S, AnswerCore, Answering, CallArgs, CallStart, End, Failed, Read, Text)
from ..schemas import ChatCompletionRequest, CompletionRequest
from ..wire import Outcome, dumps, provenance_items
from .library import FolderAnswers, asked_sources
from .openai_wire import CompletionShape


class Completions:
    """The two OpenAI generation endpoints over one served engine's answer core (and the
    served folder, when there is one)."""

    def __init__(self, core: AnswerCore, library: FolderAnswers | None = None):
        self.core, self.library = core, library

    async def generate(self, request: Request, req: Union[ChatCompletionRequest, CompletionRequest]) -> Response:
        sources = await asked_sources(self.library, self.core, req)
        answering = await self.core.begin(req)
        shape = CompletionShape(answering.kind, answering.request_id, self.core.served.id)
        if req.stream:
            # On shutdown, sse-starlette waits up to the grace period for the stream to end by
            # itself (the runner has cancelled the generation: it ends with an error chunk).
            return EventSourceResponse(self.stream(answering, shape, req, sources), sep="\n",
                                       shutdown_grace_period=SHUTDOWN_GRACE_S)
        choices, outcomes = [], []
        for i in range(answering.count):
            whole = await answering.choice(i).whole(request)
            tokens = whole.tokens
            choices.append(shape.choice(i, whole.text, whole.outcome, tokens if req.provenance else None,
                                        shape.logprobs(tokens, self.core.piece), finish=whole.finish,
                                        tool_calls=whole.calls))
            outcomes.append(whole.outcome)
        body = shape.full(choices, outcomes, per_prompt=answering.per_prompt)
        if sources is not None:
            body["sources"] = sources
        return JSONResponse(body)

    async def stream(self, answering: Answering, shape: CompletionShape, req: Any,
                     sources: list[dict[str, Any]] | None = None):
        """Server-sent chunks as tokens arrive, choice after choice; a failure or a shutdown ends
        the stream with an error chunk. The usage chunk (when asked) adds up every choice."""
        outcomes: list[Outcome] = []
        for i in range(answering.count):
            events = answering.choice(i).events()
            try:
                async for data in self.choice_chunks(events, i, shape, req, outcomes):
                    yield {"data": data}
            finally:
                await events.aclose()  # a client that went away stops its generation at the next step
            if len(outcomes) <= i:  # failed or cancelled: its error chunk ended the stream
                return
        if req.include_usage and outcomes:
            yield {"data": dumps(shape.usage_chunk(outcomes, per_prompt=answering.per_prompt))}
        if sources is not None:  # a chunk of their own, no choices (as the usage chunk)
            yield {"data": dumps(shape.sources_chunk(sources))}
        yield {"data": "[DONE]"}

    async def choice_chunks(self, events: Any, index: int, shape: CompletionShape, req: Any,
                            outcomes: list[Outcome]):
        """One choice's chunks. A chat stream's first chunk (the role) goes out once the prompt
        is read, so a client timing it measures prompt processing (`--early-role-chunk`: at once).
        A tool call goes out as `delta.tool_calls` chunks: its header, then its argument pieces."""
        role_sent = not shape.chat
        if not role_sent and self.core.config.early_role_chunk:
            yield dumps(shape.chunk("", role=True, index=index))
            role_sent = True
        async for ev in events:
            if isinstance(ev, Read):
                if not role_sent:
                    yield dumps(shape.chunk("", role=True, index=index))
                    role_sent = True
            elif isinstance(ev, Text):
                yield dumps(self.attach(shape.chunk(ev.text, index=index), req, shape, ev.tokens, ev.offset))
            elif isinstance(ev, CallStart):
                item = {"index": ev.index, "id": ev.id, "type": "function", "function": {"name": ev.name,
                                                                                       "arguments": ""}}
                yield dumps(self.attach(shape.tool_call_chunk(item, index), req, shape, ev.tokens, ev.offset))
            elif isinstance(ev, CallArgs):
                item = {"index": ev.index, "function": {"arguments": ev.text}}
                yield dumps(self.attach(shape.tool_call_chunk(item, index), req, shape, ev.tokens, ev.offset))
            elif isinstance(ev, End):
                outcomes.append(ev.outcome)
                final = shape.final_chunk(ev.outcome, index, tool_calls=ev.finish == "tool_calls")
                yield dumps(self.attach(final, req, shape, ev.tokens, ev.offset))
            elif isinstance(ev, Failed):
                yield dumps(ev.error.body)

    def attach(self, body: dict[str, Any], req: Any, shape: CompletionShape, tokens: list[TokenEvent],
               offset: int) -> dict[str, Any]:
        """Put these tokens' log-probabilities (and provenance, when asked) on a chunk."""
        if tokens:
            choice = body["choices"][0]
            choice["logprobs"] = shape.logprobs(tokens, self.core.piece, offset)
            if req.provenance:
                choice["provenance"] = provenance_items(tokens)
        return body


def completions_router(completions: Completions, check_key: Callable[..., Any]) -> APIRouter:
    """The two generation endpoints (with their unversioned aliases), behind the key check."""
    router = APIRouter(dependencies=[Depends(check_key)])

    @router.post("/v1/chat/completions")
    @router.post("/chat/completions", include_in_schema=False)
    async def chat_completions(request: Request, body: ChatCompletionRequest) -> Response:
        return await completions.generate(request, body)

    @router.post("/v1/completions")
    @router.post("/completions", include_in_schema=False)
    async def text_completions(request: Request, body: CompletionRequest) -> Response:
        return await completions.generate(request, body)

    return router
