"""Which vision projector (`mmproj-*.gguf`) lies beside a target: found by name alone, so the
app and the CLI can ask before anything is loaded (engine/llamacpp/vision.py loads it)."""

from __future__ import annotations

import os
from pathlib import Path


def projectors_beside(target: str | os.PathLike[str]) -> list[Path]:
    """The projector files (mmproj*.gguf) in `target`'s folder."""
    target = Path(target)
    try:
        return sorted(p for p in target.parent.glob("*.gguf") if p.name.lower().startswith("mmproj") and p != target)
    except OSError:  # the folder went away or cannot be listed: no projector to offer
        return []


def projector_beside(target: str | os.PathLike[str]) -> Path | None:
    """The projector file next to `target` (mmproj-*.gguf, as llama-server and LM Studio find
    them): the only one, or the one named after the target; None when there is none to pick."""
    target = Path(target)
    found = projectors_beside(target)
    if len(found) == 1:
        return found[0]
    stem = target.stem.lower().split("-q")[0]
    named = [p for p in found if stem and stem in p.name.lower()]
    return named[0] if len(named) == 1 else None
