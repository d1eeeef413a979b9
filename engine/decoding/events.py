"""What the decoder tells its listeners: plain dataclasses, serialisable to JSON.

Every consumer (CLI, GUI worker, benchmark, tests) reads the same stream:
`PrefillEvent`* then (`TokenEvent`* `StepEvent`)* then one `DoneEvent` with `RunStats`; a
`DraftReadEvent` before the steps during which a model draft reads the context it has not seen.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Union

Provenance = Literal["draft", "target", "bonus", "plain"]
PROVENANCES: tuple[str, ...] = ("draft", "target", "bonus", "plain")


@dataclass
class PrefillEvent:
    """Prompt evaluation progress (long prompts are evaluated in chunks)."""

    done: int
    total: int
    kind: str = "prefill"
    cached: int = 0  # prompt tokens not read at all: kept in the KV cache or restored from the prompt cache


@dataclass
class TokenEvent:
    """One generated token.

    provenance: `draft` = proposed by the drafter and accepted by the target; `target` =
    the target's correction after a rejection; `bonus` = the target's extra token after a
    fully accepted draft; `plain` = ordinary decoding (nothing was drafted this step).
    `text` is whole UTF-8: a character split across tokens arrives with the token that
    completes it (earlier parts carry ""). Text held back as a possible stop string is
    released later or never (if it was the stop string).
    """

    text: str
    token_id: int
    provenance: Provenance
    index: int  # position in the generated output, from 0
    step: int
    t: float  # seconds since the run started
    kind: str = "token"
    # Only when the request asked for logprobs: the token's log-probability under the target's
    # (processed) distribution, and the best alternatives as (token id, log-probability).
    logprob: float | None = None
    top_logprobs: list[tuple[int, float]] | None = None


@dataclass
class StepEvent:
    """One draft -> verify -> accept step."""

    step: int
    k: int  # lookahead asked for this step (a free proposal Auto took beside a model draft: the tokens it verified)
    drafted: int  # tokens the drafter actually proposed (<= k)
    accepted: int  # of those, accepted by the target
    emitted: int  # tokens produced this step (accepted + 1, fewer if a stop hit)
    draft_ms: float
    verify_ms: float
    t: float
    kind: str = "step"


@dataclass
class DraftReadEvent:
    """A model draft is reading the context it has not seen (the prompt, once Auto first
    decides to draft): `done` of `total` tokens read so far. It reads in chunks between target
    steps, which go on writing tokens meanwhile; `total` grows with them. Said so that a
    window can tell why the answer is not drafted yet (`done == total`: it has caught up)."""

    done: int
    total: int
    kind: str = "draft_read"


@dataclass
class RunStats:
    """Totals of one generation. acceptance_rate = accepted / drafted (0 when nothing drafted)."""

    prompt_tokens: int = 0
    cached_tokens: int = 0  # of them, not read: kept in the context or restored from the prompt cache
    generated_tokens: int = 0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    acceptance_rate: float = 0.0
    mean_tokens_per_step: float = 0.0
    decode_tokens_per_s: float = 0.0
    prefill_tokens_per_s: float = 0.0
    time_to_first_token_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    wall_s: float = 0.0
    draft_s: float = 0.0
    verify_s: float = 0.0
    draft_sync_s: float = 0.0  # a model draft reading the prompt/context it had not seen yet (chunks between steps: in decode_s)
    finish_reason: str = ""  # stop | length | cancelled
    stopped_by: str = ""  # eos | stop_string | max_tokens | context_full | cancel
    mode: str = ""  # target | model | lookup
    lookahead: str = ""  # the setting at the end, with the ks used: "5", "auto (k=0 x40, 3 x12)"
    k_counts: dict[str, int] = field(default_factory=dict)  # steps per drafted k
    provenance_counts: dict[str, int] = field(default_factory=dict)
    accepted_by: dict[str, int] = field(default_factory=dict)  # accepted draft tokens per drafter that proposed them
    # Draft sources Auto stopped using because their proposals were not accepted, with why and since
    # when: {"mtp": "0 of 14 drafted tokens accepted (since step 4)"} (engine/decoding/drafting/set_aside.py)
    set_aside: dict[str, str] = field(default_factory=dict)

    def finalize(self) -> "RunStats":
        self.acceptance_rate = self.accepted / self.drafted if self.drafted else 0.0
        self.mean_tokens_per_step = self.generated_tokens / self.steps if self.steps else 0.0
        self.decode_tokens_per_s = self.generated_tokens / self.decode_s if self.decode_s > 0 else 0.0
        self.prefill_tokens_per_s = self.prompt_tokens / self.prefill_s if self.prefill_s > 0 else 0.0
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DoneEvent:
    text: str
    tokens: list[int]
    stats: RunStats
    kind: str = "done"


Event = Union[PrefillEvent, TokenEvent, StepEvent, DraftReadEvent, DoneEvent]


def event_to_json(ev: Event) -> str:
    return json.dumps(asdict(ev), ensure_ascii=False)


def json_safe(value: Any) -> Any:
    """`value` with what strict JSON cannot hold replaced: NaN/Infinity -> None, lone
    surrogates -> U+FFFD, numpy scalars and tuples -> plain numbers and lists."""
    if isinstance(value, dict):
        return {json_safe(k) if isinstance(k, str) else str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value) if _has_surrogates(value) else value
    if hasattr(value, "item") and not isinstance(value, (int, float)):  # numpy scalar
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value
    return json_safe(str(value))


def _has_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True
