"""`tandem serve --library DIR`: a chat request that sets `"library": true` is answered from the
folder, on every API that writes chat answers (OpenAI chat, Responses, Anthropic, Ollama). Its index (engine/library/) is brought up to date first (with a watch, only the files
that changed since the last question are read), the engine's best passages for the last user
message that fit the context go into that message numbered, as `tandem ask` puts them, and the
answer carries `sources` ([{"n", "file", "page" or "section", "score"}]): in the body, or, streamed,
in the stream's last piece (OpenAI: a chunk of its own before `[DONE]`; Responses: the completed
response; Anthropic: `message_delta`; Ollama: the `done` line). `GET /v1/library` says what the
index holds.
Nothing is ranked here: this module only asks `engine.library`."""

from __future__ import annotations

import threading
from typing import Any, Callable

from fastapi import APIRouter, Depends
from starlette.concurrency import run_in_threadpool

from ....errors import TandemError
from ..errors import ApiError
from ..schemas import ChatCompletionRequest

TOP = 6  # passages retrieved, best first (as `tandem ask`'s default)
ANSWER_TOKENS = 384  # kept for the answer when the request sets no max_tokens (as `tandem ask`'s default)


class FolderAnswers:
    """One served folder: its `engine.library.Library` (opened, and watched or not, by the
    caller, who closes it) and the engine whose tokens the prompt is fitted with."""

    def __init__(self, library: Any, engine: Any):
        self.library, self.engine = library, engine
        self._update = threading.Lock()  # one index update at a time; searches open their own connection

    @staticmethod
    def wanted(req: Any) -> bool:
        """The request asks the folder (`"library": true`; anything else but false or absent is refused)."""
        if not isinstance(req, ChatCompletionRequest):
            return False
        value = (req.model_extra or {}).get("library", False)
        if not isinstance(value, bool):
            raise ApiError(400, f"'library' must be true or false, got {value!r}", param="library")
        return value

    async def prepare(self, req: ChatCompletionRequest) -> list[dict[str, Any]]:
        """Put the folder's passages in the request's last user message; the sources it holds."""
        return await run_in_threadpool(self._prepare, req)

    def _prepare(self, req: ChatCompletionRequest) -> list[dict[str, Any]]:
        from ....library import fit_to_context, source_entry

        last = next((i for i in range(len(req.messages) - 1, -1, -1) if req.messages[i].role == "user"), None)
        if last is None or not req.messages[last].content.strip():
            raise ApiError(400, "'library': true needs a user message holding the question", param="messages")
        try:
            with self._update:
                self.library.update()
            question = req.messages[last].content
            hits = self.library.search(question, TOP)
            prior = [m.as_engine_message() for m in req.messages[:last]]
            used = len(self.engine.tokens_for(prior, chat=True)) if prior else 0
            budget = self.engine.n_ctx - (req.token_limit or ANSWER_TOKENS) - used
            ask = fit_to_context(lambda text, chat: len(self.engine.tokens_for(text, chat=chat)), question, hits,
                                 True, budget)
        except TandemError as e:  # a damaged index, a folder gone: one line
            raise ApiError(500, f"library: {e}", type="server_error") from None
        if ask is None:
            raise ApiError(400, f"the context ({self.engine.n_ctx} tokens) leaves no room for the question and its "
                           "sources beside max_tokens", param="max_tokens", code="context_length_exceeded")
        req.messages[last] = req.messages[last].model_copy(update={"content": ask.text})
        return [source_entry(i + 1, h) for i, h in enumerate(ask.sources)]

    def status(self) -> dict[str, Any]:
        """What the index holds (as of the last question's update), and whether it is watched."""
        try:
            held = self.library.held()
        except TandemError as e:
            raise ApiError(500, f"library: {e}", type="server_error") from None
        return {"object": "library", "folder": str(self.library.folder), "files": held.files,
                "passages": held.passages, "vectors": held.vectors, "watching": self.library.watch is not None,
                "unreadable": [{"file": f, "reason": r} for f, r in held.unreadable]}


async def asked_sources(folder: FolderAnswers | None, core: Any, req: Any) -> list[dict[str, Any]] | None:
    """The folder's passages put in a chat request that asks for them (`"library": true`); their
    sources (None: not asked). A server without a folder says so in one line."""
    if not FolderAnswers.wanted(req):
        return None
    if folder is None:
        raise ApiError(400, "'library': this server was started without --library DIR", param="library")
    core.check_model(req.model)  # an unknown model is said before the folder is read
    return await folder.prepare(req)


def library_router(answers: FolderAnswers, check_key: Callable[..., Any]) -> APIRouter:
    router = APIRouter(dependencies=[Depends(check_key)])

    @router.get("/v1/library")
    async def library_status() -> dict[str, Any]:
        return await run_in_threadpool(answers.status)

    return router
