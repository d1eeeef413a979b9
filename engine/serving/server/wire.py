"""What every API writes the same way: compact JSON, usage counts (OpenAI's names, which the
other APIs translate), timings and provenance.

`timings` uses llama.cpp server's names where one exists (prompt_n, prompt_ms,
predicted_n, predicted_ms, predicted_per_second, draft_n, draft_n_accepted, cache_n) and
adds Tandem's own figures (acceptance_rate, mean_tokens_per_step, lookahead, draft,
provenance_counts), so clients written for either keep working.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...decoding.events import RunStats, TokenEvent

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


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
