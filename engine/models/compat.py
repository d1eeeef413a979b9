"""Can a draft model propose tokens for a target, and how? Decided from GGUF headers alone.

Speculation compares token *ids*. When the two vocabularies agree by llama.cpp's own rules
(common/speculative.cpp: same tokenizer type, same BOS/EOS handling, vocabulary sizes
within 128, token texts identical from id 5 on) the draft's ids go to the target as they
are ("shared"). Otherwise the pair is "bridged": the draft's proposal is turned into text
and tokenised again for the target (engine/decoding/drafting/bridge_drafter.py), which costs two
short tokenisations per step and can only work when the draft's tokenizer can write any
text the target writes (byte-level BPE, or byte fallback tokens). A pair that cannot be
bridged is refused with the reason. All of it before loading a single weight; so is a file
that can only draft (Gemma 4's assistant) given as a target (`require_target`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..errors import IncompatiblePairError, UnsupportedModelError
from .gguf_header import GGUFHeader, read_header

VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5
BYTE_LEVEL_TOKENIZERS = ("gpt2",)  # byte-level BPE: every byte sequence has a spelling
BYTE_TOKEN_TYPE = 6  # llama.cpp's LLAMA_TOKEN_TYPE_BYTE: the <0xNN> fallback tokens
_BYTE_TOKENS = frozenset(f"<0x{b:02X}>" for b in range(256))
SHARED, BRIDGED = "shared", "bridged"
BRIDGE_COST = ("drafts are bridged through text: each step turns the draft's proposal into "
               "the target's tokens and the accepted text into the draft's (two short tokenisations, "
               "well under a millisecond), and a proposal that splits words differently is accepted "
               "only as far as the target's own tokens agree")


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
    types: list[int] = field(default_factory=list)  # tokenizer.ggml.token_type per token

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
            types=[int(t) for t in md.get("tokenizer.ggml.token_type") or [] if isinstance(t, (int, float))],
        )

    def writes_any_text(self) -> str | None:
        """None when this tokenizer can encode any UTF-8 text; else why it cannot."""
        if self.model in BYTE_LEVEL_TOKENIZERS:
            return None
        n_bytes = sum(1 for t in self.types if t == BYTE_TOKEN_TYPE)
        if n_bytes < 256:
            n_bytes = max(n_bytes, len(_BYTE_TOKENS.intersection(self.tokens)))
        if n_bytes >= 256:
            return None
        return (f"the {self.source} tokenizer ({self.model or 'unknown type'}) has no byte fallback "
                f"({n_bytes} of 256 byte tokens), so it cannot write every text the other model writes")


def _opt_int(v: object) -> int | None:
    return int(v) if isinstance(v, (int, float)) else None


@dataclass
class Verdict:
    """Result of a compatibility check; `reasons` explains every failed rule."""

    compatible: bool
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    mode: str = SHARED  # SHARED: the draft's ids go to the target; BRIDGED: through text

    def __bool__(self) -> bool:
        return self.compatible

    @property
    def bridged(self) -> bool:
        return self.compatible and self.mode == BRIDGED

    def summary(self) -> str:
        if self.bridged:
            return "bridged (text): " + "; ".join(self.notes)
        if self.compatible:
            extra = f" ({'; '.join(self.notes)})" if self.notes else ""
            return "compatible" + extra
        return "incompatible: " + "; ".join(self.reasons)


def check_vocabs(target: VocabInfo, draft: VocabInfo) -> Verdict:
    """The pair's verdict: shared vocabulary, bridged through text, or refused with why."""
    shared = check_shared(target, draft)
    if shared or not (target.tokens and draft.tokens):
        return shared
    unusable = [why for why in (draft.writes_any_text(),) if why]
    if unusable:
        return Verdict(False, shared.reasons[:1] + unusable)
    why = "; ".join(shared.reasons) or "the vocabularies differ"
    notes = [f"vocabularies differ ({why})", BRIDGE_COST]
    if target.writes_any_text():
        notes.append("the target cannot spell every text the draft writes: such proposals are simply rejected")
    return Verdict(True, [], notes, BRIDGED)


def check_shared(target: VocabInfo, draft: VocabInfo) -> Verdict:
    """Apply llama.cpp's speculative-decoding vocabulary rules (ids usable as they are)."""
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
    """Like `check_pair` (a bridged pair passes), raising `IncompatiblePairError` with the reasons."""
    verdict = check_pair(target, draft)
    if not verdict:
        raise IncompatiblePairError(
            f"draft cannot speculate for target: {'; '.join(verdict.reasons)}", verdict.reasons
        )
    return verdict


def kept_verdict(target: str | os.PathLike[str], draft: str | os.PathLike[str],
                 target_header: GGUFHeader | None = None) -> Verdict:
    """`require_compatible` for two files, its compatible verdict kept in the calibration store
    by both files' content ids: reading and comparing two 151,936-token vocabularies took 0.75 s
    of every `tandem generate` with a draft on a 2-core VM, for the same answer each time.
    `target_header`: the target's, already read (a loaded model's), not read again."""
    from .calibration import content_id, load, save

    k = f"pair|{content_id(target)}|{content_id(draft)}"
    kept = load(k)
    if kept is not None and isinstance(kept.get("mode"), str):
        return Verdict(True, notes=[str(n) for n in kept.get("notes") or []], mode=kept["mode"])
    verdict = require_compatible(target_header if target_header is not None else target, draft)
    save({k: {"mode": verdict.mode, "notes": verdict.notes}})
    return verdict


# Files that only draft: Gemma 4's assistant reads its target's KV cache, so llama.cpp makes a
# context for it only beside that target's (`ctx_other`). Architecture -> (the targets'
# architecture, their family's name).
DRAFT_ONLY = {"gemma4-assistant": ("gemma4", "Gemma 4")}


def require_target(path: str | os.PathLike[str], how: str | None = None) -> None:
    """Refuse, from the header alone, a file that can only draft: `UnsupportedModelError`
    "FILE drafts for Gemma 4 targets: use it as the draft" and `how` (the CLI's flag; by default
    "with a Gemma 4 model as the target"), instead of llama.cpp's context error after loading
    it. An unreadable file raises ModelFileError, as loading it would."""
    arch = read_header(path, with_tensors=False, arrays=False).architecture
    if arch in DRAFT_ONLY:
        family = DRAFT_ONLY[arch][1]
        how = f", with a {family} model as the target" if how is None else how
        raise UnsupportedModelError(f"{os.fspath(path)} drafts for {family} targets: use it as the draft{how}")


def _vocab(x: str | os.PathLike[str] | GGUFHeader, role: str) -> VocabInfo:
    if isinstance(x, GGUFHeader):
        return VocabInfo.from_header(x, role)
    return VocabInfo.from_header(read_header(x, with_tensors=False), os.fspath(x))
