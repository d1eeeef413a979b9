"""Can a draft model propose tokens for a target? Decided from GGUF headers alone.

Speculation compares token *ids*, so the two vocabularies must agree. These are
llama.cpp's own rules (common/speculative.cpp): same tokenizer type, same BOS/EOS
handling, vocabulary sizes within 128, token texts identical from id 5 on. We check them
before loading a single weight, so an incompatible pair fails in milliseconds with
reasons a person can act on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..errors import IncompatiblePairError
from .gguf_header import GGUFHeader, read_header

VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5


@dataclass
class VocabInfo:
    """The tokenizer facts that decide compatibility."""

    source: str
    model: str  # tokenizer.ggml.model: gpt2 (BPE), llama (SPM), ...
    tokens: list[str]
    bos: int | None
    eos: int | None
    add_bos: bool
    add_eos: bool

    @classmethod
    def from_header(cls, header: GGUFHeader, source: str) -> "VocabInfo":
        md = header.metadata
        tokens = md.get("tokenizer.ggml.tokens")
        if not isinstance(tokens, list) or not tokens:
            tokens = []
        return cls(
            source=source,
            model=str(md.get("tokenizer.ggml.model", "")),
            tokens=tokens,
            bos=_opt_int(md.get("tokenizer.ggml.bos_token_id")),
            eos=_opt_int(md.get("tokenizer.ggml.eos_token_id")),
            add_bos=bool(md.get("tokenizer.ggml.add_bos_token", False)),
            add_eos=bool(md.get("tokenizer.ggml.add_eos_token", False)),
        )


def _opt_int(v: object) -> int | None:
    return int(v) if isinstance(v, (int, float)) else None


@dataclass
class Verdict:
    """Result of a compatibility check; `reasons` explains every failed rule."""

    compatible: bool
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.compatible

    def summary(self) -> str:
        if self.compatible:
            extra = f" ({'; '.join(self.notes)})" if self.notes else ""
            return "compatible" + extra
        return "incompatible: " + "; ".join(self.reasons)


def check_vocabs(target: VocabInfo, draft: VocabInfo) -> Verdict:
    """Apply llama.cpp's speculative-decoding vocabulary rules."""
    reasons: list[str] = []
    notes: list[str] = []
    if not target.tokens:
        reasons.append(f"target {target.source} has no tokenizer vocabulary in its header")
    if not draft.tokens:
        reasons.append(f"draft {draft.source} has no tokenizer vocabulary in its header")
    if reasons:
        return Verdict(False, reasons)
    if target.model != draft.model:
        reasons.append(f"tokenizer types differ: target {target.model!r}, draft {draft.model!r}")
    if target.add_bos != draft.add_bos:
        reasons.append(f"add-BOS differs: target {target.add_bos}, draft {draft.add_bos}")
    if target.bos != draft.bos:
        reasons.append(f"BOS token differs: target {target.bos}, draft {draft.bos}")
    if target.add_eos != draft.add_eos:
        reasons.append(f"add-EOS differs: target {target.add_eos}, draft {draft.add_eos}")
    if target.eos != draft.eos:
        reasons.append(f"EOS token differs: target {target.eos}, draft {draft.eos}")
    nt, nd = len(target.tokens), len(draft.tokens)
    if abs(nt - nd) > VOCAB_MAX_SIZE_DIFFERENCE:
        reasons.append(
            f"vocabulary sizes differ by {abs(nt - nd)} (target {nt}, draft {nd}; at most "
            f"{VOCAB_MAX_SIZE_DIFFERENCE} allowed)"
        )
    elif nt != nd:
        notes.append(f"vocabulary sizes {nt} and {nd} differ by {abs(nt - nd)}, within the allowed {VOCAB_MAX_SIZE_DIFFERENCE}")
    n = min(nt, nd)
    for i in range(VOCAB_CHECK_START_TOKEN_ID, n):
        if target.tokens[i] != draft.tokens[i]:
            reasons.append(
                f"token {i} differs: target {target.tokens[i]!r}, draft {draft.tokens[i]!r} "
                "(different tokenizers)"
            )
            break
    return Verdict(not reasons, reasons, notes)


def check_pair(target: str | os.PathLike[str] | GGUFHeader, draft: str | os.PathLike[str] | GGUFHeader) -> Verdict:
    """Compatibility verdict for two GGUF files (paths) or already-read headers."""
    t = _vocab(target, "target")
    d = _vocab(draft, "draft")
    return check_vocabs(t, d)


def require_compatible(target: str | os.PathLike[str] | GGUFHeader, draft: str | os.PathLike[str] | GGUFHeader) -> Verdict:
    """Like `check_pair`, raising `IncompatiblePairError` with the reasons."""
    verdict = check_pair(target, draft)
    if not verdict:
        raise IncompatiblePairError(
            f"draft cannot speculate for target: {'; '.join(verdict.reasons)}", verdict.reasons
        )
    return verdict


def _vocab(x: str | os.PathLike[str] | GGUFHeader, role: str) -> VocabInfo:
    if isinstance(x, GGUFHeader):
        return VocabInfo.from_header(x, role)
    return VocabInfo.from_header(read_header(x, with_tensors=False), os.fspath(x))
