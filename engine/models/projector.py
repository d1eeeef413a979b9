"""A target's vision projector (`mmproj`) file: found and checked before anything loads.

Where it is: the one given, else beside the target (an mmproj*.gguf in its folder, as
llama-server and LM Studio keep them), else the catalog's projector of the catalog model the
target file is (downloaded with it, possibly at another revision's folder). Whether it fits:
its header says it encodes pictures (`clip.has_vision_encoder`) and its projection width is
the target's embedding width, the check libmtmd makes only after loading both. `tandem check`
and the app use this to say whether a target can see; engine/llamacpp/vision.py runs it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .gguf_header import GGUFHeader


def projectors_beside(target: str | os.PathLike[str]) -> list[Path]:
    """The projector files (mmproj*.gguf) in `target`'s folder."""
    target = Path(target)
    try:
        return sorted(p for p in target.parent.glob("*.gguf") if p.name.lower().startswith("mmproj") and p != target)
    except OSError:
        return []


def projector_beside(target: str | os.PathLike[str]) -> Path | None:
    """The projector file next to `target`: the only one, or the one named after the target;
    None when there is none to pick."""
    target = Path(target)
    found = projectors_beside(target)
    if len(found) == 1:
        return found[0]
    stem = target.stem.lower().split("-q")[0]
    named = [p for p in found if stem and stem in p.name.lower()]
    return named[0] if len(named) == 1 else None


def catalog_projector(target: str | os.PathLike[str]) -> Path | None:
    """The downloaded projector the catalog names for the catalog model whose file `target` is."""
    from . import catalog, store
    from ..errors import TandemError

    try:
        cat = catalog.load()
        real = Path(target).resolve()
    except (TandemError, OSError):
        return None
    for spec in cat.models.values():
        if spec.projector is None:
            continue
        path = store.find_file(spec.files[0])
        if path is not None and path.resolve() == real:
            return store.find_file(spec.projector)
    return None


def find_projector(target: str | os.PathLike[str]) -> Path | None:
    """The projector a target is loaded with when none is given: beside it, else the catalog's."""
    return projector_beside(target) or catalog_projector(target)


@dataclass(frozen=True)
class ProjectorFit:
    """Whether a projector can feed a target pictures, in one line either way."""

    ok: bool
    line: str


def projector_fit(target: GGUFHeader, projector: GGUFHeader, name: str = "the projector") -> ProjectorFit:
    """Check a projector's header against its target's: a vision encoder, projecting into the
    target's embedding width (when the projector declares its width)."""
    if projector.architecture != "clip":
        return ProjectorFit(False, f"{name} is a {projector.architecture!r} model, not a projector (clip)")
    if not projector.get("clip.has_vision_encoder", False):
        kinds = "audio only" if projector.get("clip.has_audio_encoder", False) else "no vision encoder"
        return ProjectorFit(False, f"{name} has {kinds}: it reads no pictures")
    kind = projector.get("clip.projector_type") or projector.get("clip.vision.projector_type") or "clip"
    width = projector.get("clip.vision.projection_dim")
    embd = target.arch_value("embedding_length")
    if width is not None and embd is not None and int(width) != int(embd):
        return ProjectorFit(False, f"{name} ({kind}) projects to {int(width):,} wide embeddings but the target's "
                                   f"are {int(embd):,}: it belongs to another model")
    said = f"projects to {int(width):,} = the target's embedding width" if width is not None and embd is not None \
        else "its projection width is not declared: llama.cpp checks it when loading"
    return ProjectorFit(True, f"{name} ({kind}) {said}")
