"""The OpenAI wire format: response bodies, stream chunks, usage, timings and error bodies.

`timings` uses llama.cpp server's names where one exists (prompt_n, prompt_ms,
predicted_n, predicted_ms, predicted_per_second, draft_n, draft_n_accepted, cache_n) and
adds Tandem's own figures (acceptance_rate, mean_tokens_per_step, lookahead, draft,
provenance_counts), so clients written for either keep working.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from ...decoding.events import RunStats, TokenEvent
from ..tools.tool_calls import ToolCall

FINISH = {"stop": "stop", "length": "length", "cancelled": "stop", "": "stop"}


@dataclass
class Outcome:
    """What one finished generation reports back: its stats and how much prompt was cached."""

    stats: RunStats
    prompt_evaluated: int  # prompt tokens actually evaluated (the rest came from the KV cache)

    @property
    def cached(self) -> int:
        return max(0, self.stats.prompt_tokens - self.prompt_evaluated)


def usage(o: Outcome) -> dict[str, Any]:
    return usage_of([o])


def usage_of(outcomes: list[Outcome], per_prompt: int = 1) -> dict[str, Any]:
    """Usage of one request: each prompt once (its choices come `per_prompt` in a row), the
    completion tokens of all its choices."""
    firsts = outcomes[::max(1, per_prompt)]
    prompt = sum(o.stats.prompt_tokens for o in firsts)
    completion = sum(o.stats.generated_tokens for o in outcomes)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": sum(o.cached for o in firsts)},
    }


def _entry(token: int, logprob: float, piece: Callable[[int], bytes]) -> dict[str, Any]:
    raw = piece(token)
    return {"token": raw.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(raw)}


def chat_logprob(t: TokenEvent, piece: Callable[[int], bytes]) -> dict[str, Any]:
    """One token of a chat answer's `logprobs.content`: it, its bytes, and its best alternatives."""
    entry = _entry(t.token_id, float(t.logprob or 0.0), piece)
    entry["top_logprobs"] = [_entry(i, lp, piece) for i, lp in t.top_logprobs or []]
    return entry


def timings(o: Outcome) -> dict[str, Any]:
    s = o.stats
    prompt_ms = s.prefill_s * 1000.0
    return {
        "cache_n": o.cached,
        "prompt_n": o.prompt_evaluated,
        "prompt_ms": prompt_ms,
        "prompt_per_second": o.prompt_evaluated / s.prefill_s if s.prefill_s > 0 else 0.0,
        "predicted_n": s.generated_tokens,
        "predicted_ms": s.decode_s * 1000.0,
        "predicted_per_second": s.decode_tokens_per_s,
        "draft_n": s.drafted,
        "draft_n_accepted": s.accepted,
        "acceptance_rate": s.acceptance_rate,
        "mean_tokens_per_step": s.mean_tokens_per_step,
        "steps": s.steps,
        "lookahead": s.lookahead,
        "draft": s.mode,
        "provenance_counts": dict(s.provenance_counts),
        "time_to_first_token_ms": s.time_to_first_token_s * 1000.0,
        "stopped_by": s.stopped_by,
    }


def provenance_items(tokens: list[TokenEvent]) -> list[dict[str, Any]]:
    """Where each token came from: draft (accepted), target (correction), bonus, plain."""
    return [{"token": t.token_id, "text": t.text, "provenance": t.provenance} for t in tokens]


def finish_reason(stats: RunStats) -> str:
    return FINISH.get(stats.finish_reason, "stop")


class Shape:
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


def error_body(message: str, *, type: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
