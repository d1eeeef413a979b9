"""`POST /infill`: llama-server's fill-in-the-middle endpoint, for code editors (llama.vscode,
llama.vim). The prompt is laid out from the model's own FIM tokens (`fim`), the answer runs
through the same queue and speculation as every other request (prompt lookup drafts from
the prefix, suffix and extra chunks: they are all in the prompt), and the body is
llama-server's non-OpenAI one (`content`, `tokens_predicted`, `timings`, `stop_type`, ...).
"""

from __future__ import annotations

import uuid
from typing import Any, AsyncIterator, Callable

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from ....decoding.events import DoneEvent, TokenEvent
from ..answer import SHUTDOWN_GRACE_S, AnswerCore, Choice, End, Failed, Text
from ..errors import ApiError
from ....decoding.prompting.fim_layout import ExtraChunk, infill_tokens
from ..fim import fim_tokens_or_400
from ..wire import Outcome, dumps, timings
from .editor_limits import EditorLimits
from .infill_schema import InfillRequest

STOP_TYPES = {"eos": "eos", "stop_string": "word", "max_tokens": "limit", "context_full": "limit"}


class InfillAnswer:
    """One infill answer as it is written: its text (after the editor's cuts), tokens and stop."""

    def __init__(self, limits: EditorLimits, prompt_only: bool):
        self.limits, self.prompt_only = limits, prompt_only
        self.tokens: list[int] = []
        self.cut = False  # ended by n_indent or t_max_predict_ms
        self.done: DoneEvent | None = None

    def add(self, text: str, tokens: list[TokenEvent]) -> str:
        """The part of this text to send (empty once the answer has ended)."""
        if self.cut or self.prompt_only:
            return ""
        self.tokens += [t.token_id for t in tokens]
        text, self.cut = self.limits.feed(text)
        return text

    @property
    def text(self) -> str:
        return "" if self.prompt_only else self.limits.text

    @property
    def whole(self) -> bool:
        """The answer ended by itself or by the editor's cut, not cancelled before that."""
        return self.done is not None and (self.cut or self.done.stats.finish_reason != "cancelled")

    def stop_type(self) -> str:
        if self.cut or self.prompt_only:
            return "limit"
        return STOP_TYPES.get(self.done.stats.stopped_by, "none") if self.done else "none"


class Infill:
    """The /infill endpoint over one served engine's answer core."""

    def __init__(self, core: AnswerCore):
        self.c = core

    async def prompt(self, req: InfillRequest, limit: int | None) -> list[int]:
        eng = self.c.eng
        fim = fim_tokens_or_400(eng.target)
        extra = [ExtraChunk(it.text, it.filename) for it in req.input_extra]

        def build() -> list[int]:
            typed = eng.target.tokenize(req.prompt, add_special=False, parse_special=True) if req.prompt else []
            return infill_tokens(eng.target, fim, req.input_prefix, req.input_suffix, extra, typed,
                                 n_ctx=eng.n_ctx, n_predict=limit or 0)

        tokens = await run_in_threadpool(build)
        bad = next((t for t in tokens if not 0 <= t < eng.target.n_vocab), None)
        if bad is not None:
            raise ApiError(400, f"token id {bad} is outside the vocabulary (0..{eng.target.n_vocab - 1})",
                           param="input_prefix", code="invalid_value")
        if len(tokens) >= eng.n_ctx:
            raise ApiError(400, f"the infill prompt is {len(tokens)} tokens but the context holds {eng.n_ctx}: "
                                "start the server with a larger --ctx", param="input_prefix",
                           code="context_length_exceeded")
        return tokens

    async def answer(self, request: Request, req: InfillRequest) -> Response:
        c = self.c
        c.check_model(req.model)
        fim_tokens_or_400(c.eng.target)  # before queueing: a model without FIM tokens never will
        controls = c.controls(req)
        limit = req.answer_limit()
        request_id = uuid.uuid4().hex[:24]
        job = c.admit("infill", request_id)
        try:
            tokens = await self.prompt(req, limit)
            room = c.eng.n_ctx - len(tokens)
            gen_req = c.generation_request(req, controls, tokens,
                                           max(1, min(room, limit)) if limit is not None else room)
        except BaseException:
            c.queue.finish(job)
            raise
        choice = c.answering(job, "infill", request_id, gen_req).choice(0)
        answer = InfillAnswer(EditorLimits(req.n_indent, max(0, req.t_max_predict_ms)), prompt_only=limit == 0)
        body = Body(self, req, tokens, answer)
        if req.stream:
            return EventSourceResponse(self.stream(choice, answer, body), sep="\n",
                                       shutdown_grace_period=SHUTDOWN_GRACE_S)
        await self.complete(request, choice, answer)
        return JSONResponse(body.final(choice.prompt_evaluated))

    async def texts(self, choice: Choice, answer: InfillAnswer) -> AsyncIterator[str]:
        """The text as it may be sent; ends the generation at an editor's cut. Raises the
        failure's ApiError."""
        events = choice.events()
        try:
            async for ev in events:
                if isinstance(ev, Text):
                    text = answer.add(ev.text, ev.tokens)
                    if answer.cut:
                        choice.end_here()
                    yield text
                elif isinstance(ev, End):
                    answer.add("", ev.tokens)
                    answer.done = ev.done
                elif isinstance(ev, Failed):
                    raise ev.error
        finally:
            await events.aclose()

    async def complete(self, request: Request, choice: Choice, answer: InfillAnswer) -> None:
        """The whole answer; a client that goes away cancels the generation."""
        async def drain() -> None:
            async for _ in self.texts(choice, answer):
                pass

        await choice.watched(request, drain())

    async def stream(self, choice: Choice, answer: InfillAnswer, body: "Body"):
        """llama-server's infill stream: a chunk per piece of text, then the final body
        (`stop: true`, empty `content`); no [DONE] line, as llama-server."""
        try:
            async for text in self.texts(choice, answer):
                if text:
                    yield {"data": dumps(body.partial(text))}
            yield {"data": dumps(body.final(choice.prompt_evaluated, streamed=True))}
        except ApiError as e:
            yield {"data": dumps(e.body)}
        finally:
            choice.cancel()


class Body:
    """llama-server's infill response bodies (`to_json_non_oaicompat`)."""

    def __init__(self, infill: Infill, req: InfillRequest, prompt: list[int], answer: InfillAnswer):
        self.infill, self.req, self.prompt, self.answer = infill, req, prompt, answer
        self.sent_tokens = 0

    def partial(self, text: str) -> dict[str, Any]:
        tokens = self.answer.tokens[self.sent_tokens:]
        self.sent_tokens = len(self.answer.tokens)
        return {"index": 0, "content": text, "tokens": tokens if self.req.return_tokens else [], "stop": False,
                "id_slot": 0, "tokens_predicted": len(self.answer.tokens), "tokens_evaluated": len(self.prompt)}

    def final(self, evaluated: int, streamed: bool = False) -> dict[str, Any]:
        a, req, c = self.answer, self.req, self.infill.c
        done = a.done
        assert done is not None
        n = 0 if a.prompt_only else len(a.tokens)
        target = c.eng.target
        res = {
            "index": 0, "content": "" if streamed else a.text,
            "tokens": a.tokens if req.return_tokens and not a.prompt_only else [],
            "id_slot": 0, "stop": True, "model": c.served.id, "tokens_predicted": n,
            "tokens_evaluated": len(self.prompt), "generation_settings": self.settings(),
            "prompt": b"".join(target.piece(t, special=True) for t in self.prompt).decode("utf-8", errors="replace"),
            "has_new_line": "\n" in a.text, "truncated": False, "stop_type": a.stop_type(),
            "stopping_word": self.stopping_word(), "tokens_cached": len(self.prompt) + n,
            "timings": timings(Outcome(done.stats, evaluated)),
        }
        return _pick(res, req.response_fields) if req.response_fields else res

    def stopping_word(self) -> str:
        """The stop string that ended the answer (the engine cuts it off the text)."""
        a = self.answer
        if a.cut or a.done is None or a.done.stats.stopped_by != "stop_string":
            return ""
        raw = self.infill.c.eng.target.detokenize(a.done.tokens)
        rest = raw[len(a.done.text):]
        return next((s for s in self.req.stop_list if rest.startswith(s)), "")

    def settings(self) -> dict[str, Any]:
        req, c = self.req, self.infill.c
        return {"n_predict": -1 if req.answer_limit() is None else req.answer_limit(),
                "temperature": c.config.temperature if req.temperature is None else req.temperature,
                "top_k": req.top_k or 0, "top_p": 1.0 if req.top_p is None else req.top_p,
                "min_p": req.min_p or 0.0, "seed": req.seed, "stop": req.stop_list, "n_indent": req.n_indent,
                "t_max_predict_ms": req.t_max_predict_ms, "draft": req.draft or c.served.default_draft,
                "lookahead": req.lookahead if req.lookahead is not None else c.served.lookahead}


def _pick(body: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """llama-server's `response_fields`: only these fields, a nested one ("timings/prompt_n")
    moved to the top under its path; missing ones left out."""
    out: dict[str, Any] = {}
    for path in paths:
        cur: Any = body
        for key in path.split("/"):
            if not isinstance(cur, dict) or key not in cur:
                break
            cur = cur[key]
        else:
            out[path] = cur
    return out


def infill_router(infill: Infill, check_key: Callable[..., Any]) -> APIRouter:
    router = APIRouter(dependencies=[Depends(check_key)])

    @router.post("/infill")
    async def infill_endpoint(request: Request, body: InfillRequest) -> Response:
        return await infill.answer(request, body)

    return router
