"""OpenAI's wire format: the bodies of chat and text completions, their stream chunks and
log-probabilities (usage and timings come from `wire`, shared by every API)."""

from __future__ import annotations

import time
from typing import Any, Callable

from ....decoding.events import TokenEvent
from ....toolcalls.tool_calls import ToolCall
from ..wire import Outcome, finish_reason, provenance_items, timings, usage_of


def _entry(token: int, logprob: float, piece: Callable[[int], bytes]) -> dict[str, Any]:
    raw = piece(token)
    return {"token": raw.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(raw)}


def chat_logprob(t: TokenEvent, piece: Callable[[int], bytes]) -> dict[str, Any]:
    """One token of a chat answer's `logprobs.content`: it, its bytes, and its best alternatives."""
    entry = _entry(t.token_id, float(t.logprob or 0.0), piece)
    entry["top_logprobs"] = [_entry(i, lp, piece) for i, lp in t.top_logprobs or []]
    return entry


class CompletionShape:
    """Builds the bodies of one response: chat (`chat.completion`) or text (`text_completion`)."""

    def __init__(self, kind: str, request_id: str, model: str):
        self.chat = kind == "chat"
        self.id = ("chatcmpl-" if self.chat else "cmpl-") + request_id
        self.model = model
        self.created = int(time.time())

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model, "system_fingerprint": "tandem"}

    def choice(self, index: int, text: str, o: Outcome, tokens: list[TokenEvent] | None,
               logprobs: dict[str, Any] | None = None, finish: str | None = None,
               tool_calls: tuple[ToolCall, ...] = ()) -> dict[str, Any]:
        """One finished choice of a non-streaming body (with tool calls: content null unless
        the model wrote text besides them, finish reason 'tool_calls' unless one is given)."""
        if tool_calls and finish is None:
            finish = "tool_calls"
        choice: dict[str, Any] = {"index": index, "finish_reason": finish or finish_reason(o.stats), "logprobs": logprobs}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text if text.strip() or not tool_calls else None}
            if tool_calls:
                choice["message"]["tool_calls"] = [c.as_openai() for c in tool_calls]
        else:
            choice["text"] = text
        if tokens is not None:
            choice["provenance"] = provenance_items(tokens)
        return choice

    def full(self, choices: list[dict[str, Any]], outcomes: list[Outcome], per_prompt: int = 1) -> dict[str, Any]:
        """The non-streaming body (usage adds up the choices; timings are the first's)."""
        body = self._head("chat.completion" if self.chat else "text_completion")
        body.update(choices=choices, usage=usage_of(outcomes, per_prompt), timings=timings(outcomes[0]))
        return body

    def chunk(self, text: str | None = None, *, role: bool = False, finish: str | None = None,
              tokens: list[TokenEvent] | None = None, index: int = 0,
              logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
        """One streamed chunk with a piece of text (and its tokens' provenance when asked)."""
        choice: dict[str, Any] = {"index": index, "finish_reason": finish, "logprobs": logprobs}
        if self.chat:
            delta: dict[str, Any] = {}
            if role:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            choice["delta"] = delta
        else:
            choice["text"] = text or ""
        if tokens is not None:
            choice["provenance"] = provenance_items(tokens)
        body = self._head("chat.completion.chunk" if self.chat else "text_completion")
        body["choices"] = [choice]
        return body

    def tool_call_chunk(self, item: dict[str, Any], index: int = 0) -> dict[str, Any]:
        """A chunk with one `delta.tool_calls` item (a call's header, or a piece of its arguments)."""
        body = self.chunk(index=index)
        body["choices"][0]["delta"] = {"tool_calls": [item]}
        return body

    def final_chunk(self, o: Outcome, index: int = 0, tool_calls: bool = False) -> dict[str, Any]:
        """The chunk that carries the finish reason (and, like llama.cpp's, the timings)."""
        body = self.chunk(finish="tool_calls" if tool_calls else finish_reason(o.stats), index=index)
        body["timings"] = timings(o)
        return body

    def usage_chunk(self, outcomes: list[Outcome], per_prompt: int = 1) -> dict[str, Any]:
        """`stream_options.include_usage`: an extra last chunk, no choices, usage and timings."""
        body = self._head("chat.completion.chunk" if self.chat else "text_completion")
        body.update(choices=[], usage=usage_of(outcomes, per_prompt), timings=timings(outcomes[0]))
        return body

    def sources_chunk(self, sources: list[dict[str, Any]]) -> dict[str, Any]:
        """`"library": true`, streamed: the sources in a last chunk of their own, no choices."""
        body = self._head("chat.completion.chunk")
        body.update(choices=[], sources=sources)
        return body

    def logprobs(self, tokens: list[TokenEvent], piece: Callable[[int], bytes], offset: int = 0) -> dict[str, Any] | None:
        """OpenAI's logprobs object for these tokens (chat: `content`; text: the four lists);
        None when the request did not ask (the tokens carry none)."""
        if not tokens or tokens[0].logprob is None:
            return None
        if self.chat:
            return {"content": [chat_logprob(t, piece) for t in tokens], "refusal": None}
        texts = [piece(t.token_id).decode("utf-8", errors="replace") for t in tokens]
        offsets = [offset + sum(len(x) for x in texts[:i]) for i in range(len(texts))]
        return {"tokens": texts, "token_logprobs": [t.logprob for t in tokens],
                "top_logprobs": [{piece(i).decode("utf-8", errors="replace"): lp for i, lp in t.top_logprobs or []}
                                 for t in tokens], "text_offset": offsets}


