"""What drafts for the target, parsed once: the draft choice a request, the CLI, the server or
the bench names (None, "none", "lookup", a GGUF path, a loaded Model, a given Drafter) as one
typed value, so no caller tests strings of its own.

A drafter that needs no file of its own (a model's MTP head, a suffix tree) becomes a new
`DraftKind` with its keyword in `KEYWORDS`; everything that parses through here knows it.

Parsing loads nothing: a loaded Model or a made Drafter exists only once its module was
imported, so the CLI and the app read a choice without loading llama.cpp.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ...errors import TandemError

if TYPE_CHECKING:  # pragma: no cover
    from ...llamacpp.llama import Model
    from .drafter_api import Drafter

# What callers may hand over as a draft (the public API's `draft_model`).
DraftSpec = Union[str, "os.PathLike[str]", "Model", "Drafter", None]


class DraftKind(Enum):
    NONE = "none"  # the target alone
    LOOKUP = "lookup"  # prompt lookup: no second model
    MTP = "mtp"  # the target's own multi-token-prediction head (Qwen3.5/3.6, GLM, DeepSeek)
    SUFFIX = "suffix"  # suffix drafting from this request and past answers: no second model
    PATH = "path"  # a draft GGUF file, loaded (once) by the engine
    MODEL = "model"  # a draft Model already loaded
    DRAFTER = "drafter"  # a Drafter the caller made


# Keywords a string may name instead of a path (compared case-insensitively; "" is none).
KEYWORDS: dict[str, DraftKind] = {"none": DraftKind.NONE, "": DraftKind.NONE, "lookup": DraftKind.LOOKUP,
                                   "mtp": DraftKind.MTP, "suffix": DraftKind.SUFFIX}


@dataclass(frozen=True)
class DraftChoice:
    """One parsed draft choice. `source` is what named it: the path as given, the Model or the
    Drafter (None for a keyword)."""

    kind: DraftKind
    source: Any = None

    @classmethod
    def parse(cls, spec: "DraftSpec | DraftChoice") -> "DraftChoice":
        """`spec` as a choice; anything else than a DraftSpec is one clear TandemError."""
        if isinstance(spec, DraftChoice):
            return spec
        if spec is None:
            return NO_DRAFT
        if isinstance(spec, str) and spec.lower() in KEYWORDS:
            return cls(KEYWORDS[spec.lower()])
        if _instance(spec, "engine.llamacpp.llama", "Model"):
            return cls(DraftKind.MODEL, spec)
        if _instance(spec, "engine.decoding.drafting.drafter_api", "Drafter"):
            return cls(DraftKind.DRAFTER, spec)
        if isinstance(spec, (str, os.PathLike)):
            return cls(DraftKind.PATH, spec)
        raise TandemError(f"draft_model must be a path, an engine.Model, 'lookup', 'mtp', 'suffix' or None, not {type(spec).__name__}")

    @property
    def keyword(self) -> str | None:
        """The keyword that names this choice ("none", "lookup", "mtp"); None for a file, model or drafter."""
        return self.kind.value if self.source is None else None

    @property
    def path(self) -> Path | None:
        """The draft's file (a path or a loaded Model's); None for a keyword or a drafter."""
        if self.kind is DraftKind.PATH:
            return Path(self.source)
        return Path(self.source.path) if self.kind is DraftKind.MODEL else None

    @property
    def spec(self) -> DraftSpec:
        """The plain form the public API takes: None, a keyword ("lookup", "mtp"), or the source itself."""
        if self.kind is DraftKind.NONE:
            return None
        return self.keyword if self.source is None else self.source

    @property
    def key(self) -> str:
        """What an engine files this choice's decoder under: one per file, model object or drafter."""
        if self.kind is DraftKind.MODEL:
            return f"model:{self.source.path.resolve()}:{id(self.source)}"
        if self.kind is DraftKind.DRAFTER:
            return f"drafter:{id(self.source)}"
        if self.kind is DraftKind.PATH:
            return f"path:{Path(self.source).resolve()}"
        return self.kind.value

    @property
    def label(self) -> str:
        """How a line shown to the user names it."""
        if self.kind is DraftKind.LOOKUP:
            return "prompt lookup"
        if self.kind is DraftKind.MTP:
            return "the target's MTP head"
        if self.kind is DraftKind.SUFFIX:
            return "suffix draft"
        if self.kind is DraftKind.NONE:
            return "no draft"
        if self.kind is DraftKind.DRAFTER:
            return f"drafter {self.source.kind}"
        return f"draft {self.path.name if self.path is not None else ''}"


NO_DRAFT = DraftChoice(DraftKind.NONE)


def _instance(obj: Any, module: str, name: str) -> bool:
    """isinstance(obj, module.name) without importing `module`: an instance exists only once it was."""
    mod = sys.modules.get(module)
    return mod is not None and isinstance(obj, getattr(mod, name))
