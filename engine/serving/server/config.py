"""What one server serves and how: the loaded engine with its id and default draft, and the limits."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ...decoding.llama import Model

DEFAULT_MAX_BODY = 4 * 1024 * 1024  # 4 MiB: a full 128K-token conversation is well under 1 MiB of JSON


@dataclass
class ServedModel:
    """What the server serves: one loaded engine, its public id and its default draft."""

    engine: Any  # engine.Engine
    id: str
    draft: Union[str, os.PathLike, Model, None] = None  # a draft model (path/Model), "lookup" or None
    lookahead: Union[int, str] = "auto"  # for requests that do not say
    aliases: tuple[str, ...] = ()

    @property
    def has_draft_model(self) -> bool:
        return self.draft is not None and not (isinstance(self.draft, str) and self.draft.lower() in ("lookup", "none"))

    @property
    def default_draft(self) -> str:
        if self.has_draft_model:
            return "model"
        return "lookup" if isinstance(self.draft, str) and self.draft.lower() == "lookup" else "none"

    def names(self) -> set[str]:
        target = Path(self.engine.target.path)
        return {self.id, target.name, target.stem, *self.aliases}


@dataclass
class ServerConfig:
    api_key: str | None = None
    max_waiting: int = 16  # requests allowed to wait behind the running one
    temperature: float = 1.0  # when a request does not say (OpenAI's default)
    list_catalog: bool = True  # /v1/models also lists downloaded catalog pairs
    max_body: int = DEFAULT_MAX_BODY  # bytes; larger request bodies get 413 before they are read (0: no limit)
    extra: dict[str, Any] = field(default_factory=dict)
