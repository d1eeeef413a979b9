"""The drafter a draft choice names, made here so the engine knows one function, not every
drafter: none, prompt lookup, the suffix draft, a given Drafter, or a model draft (a file, a
loaded Model, the target's MTP head) with the free drafters beside it (`MixedDrafter`: Auto
may take a free draft instead of the model's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ...llamacpp.llama import Model
from ...llamacpp.mtp import SHARED_CACHE_DRAFTERS
from ...llamacpp.runtime import RuntimeParams
from ...models.compat import kept_verdict, require_compatible
from ...models.gguf_header import read_header
from ...models.resolve import model_file
from .bridge_drafter import BridgeDrafter
from .choice import DraftChoice, DraftKind
from .drafters import Drafter, ModelDrafter
from .lazy_drafter import LazyModelDrafter
from .lookup_drafter import PromptLookupDrafter
from .mixed_drafter import MixedDrafter
from .mtp_drafter import MTPDrafter
from .suffix_drafter import SuffixDrafter

__all__ = ["LoadDraft", "HistoryDrafter", "make_drafter"]

# A draft file's path -> (its Model, loaded once by the engine; whether it is bridged: another vocabulary)
LoadDraft = Callable[[object], "tuple[Model, bool]"]
# with_lookup -> a suffix drafter over the engine's one store of past answers
HistoryDrafter = Callable[[bool], SuffixDrafter]


def make_drafter(choice: DraftChoice, target: Model, runtime: RuntimeParams, *, load_draft: LoadDraft,
                 history: HistoryDrafter, when_needed: bool = False) -> Drafter | None:
    """The drafter for `choice` beside `target` (None: the target alone). `runtime` is the one
    a draft model's context reads (the target's own settings). `when_needed`: a plain draft
    file (the target's vocabulary, not an assistant) is loaded at its first read or proposal,
    not now (`LazyModelDrafter`: one-shot runs whose Auto may never draft with it)."""
    kind = choice.kind
    if kind is DraftKind.NONE:
        return None
    if kind is DraftKind.LOOKUP:
        return PromptLookupDrafter()
    if kind is DraftKind.SUFFIX:
        return history(True)
    if kind is DraftKind.DRAFTER:
        return choice.source
    if kind is DraftKind.MTP:
        model: Drafter = MTPDrafter(target)
    elif when_needed and kind is DraftKind.PATH and (path := _plain_draft_file(target, choice.source)) is not None:
        model = LazyModelDrafter(path, lambda: _model_drafter(choice, target, runtime, load_draft))
    else:
        model = _model_drafter(choice, target, runtime, load_draft)
    return MixedDrafter(model, history(False))


def _plain_draft_file(target: Model, source: object) -> Path | None:
    """The draft file `source` names when it drafts as a plain model of the target's vocabulary
    (from its header's scalars and the pair's kept verdict: nothing loaded, no vocabulary read
    twice); None for an assistant head or a bridged draft. Its tensors are checked when it loads."""
    path = model_file(source, "draft").resolve()  # type: ignore[arg-type]
    if read_header(path, with_tensors=False, arrays=False).architecture in SHARED_CACHE_DRAFTERS:
        return None
    return None if kept_verdict(target.path, path, target.header).bridged else path


def _model_drafter(choice: DraftChoice, target: Model, runtime: RuntimeParams, load_draft: LoadDraft) -> Drafter:
    """A draft file's or loaded Model's drafter: an assistant head, a bridge or a plain model draft."""
    if choice.kind is DraftKind.MODEL:
        dm = choice.source
        assistant = dm.architecture in SHARED_CACHE_DRAFTERS
        bridged = not assistant and require_compatible(target.header, dm.header).bridged
    else:
        dm, bridged = load_draft(choice.source)
    if dm.architecture in SHARED_CACHE_DRAFTERS:  # Gemma 4's assistant: an MTP head of its own
        return MTPDrafter(target, dm)
    if bridged:  # another vocabulary: the draft's text is tokenised for the target
        return BridgeDrafter(dm, target, runtime)
    return ModelDrafter(dm, runtime, target_vocab=target.n_vocab)
