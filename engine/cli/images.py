"""`--image FILE` (repeatable) and `--mmproj FILE` of `tandem generate`, and the projector
`tandem serve` loads: pictures read and checked (size, format) before any model loads, the
projector given or found beside the target (mmproj-*.gguf, as llama-server and LM Studio
keep them) or downloaded with it from the catalog, and a target without one refused in one line."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import UsageError, read_option_file


def add_image_options(p: argparse.ArgumentParser, *, images: bool = True) -> None:
    if images:
        p.add_argument("--image", action="append", metavar="FILE",
                       help="a picture for a target that sees (repeatable): PNG, JPEG or WebP, placed before "
                            "the prompt's text (or where the prompt writes <__media__>); a PDF gives its pages "
                            "without a text layer (a scan), one picture each")
    p.add_argument("--mmproj", metavar="FILE",
                   help="the target's vision projector (default: an mmproj-*.gguf beside the target)")


def read_images(args: argparse.Namespace) -> tuple:
    """The --image files as checked ImageInputs (bytes and format; pixels when the engine reads
    them); one `tandem: error:` line for a missing, unreadable or unsupported file."""
    from ..documents.images import MAX_IMAGE_BYTES, ImageError, ImageInput, check_bytes
    from ..documents.pdf_images import pdf_page_images

    out: list[ImageInput] = []
    for name in getattr(args, "image", None) or ():
        if name.lower().endswith(".pdf") and Path(name).is_file():
            try:
                out += pdf_page_images(name)
            except ImageError as e:
                raise UsageError(f"--image {e}") from None
            continue
        data = read_option_file(name, "--image", MAX_IMAGE_BYTES,
                                lambda size: f"{size / 1e6:.1f} MB; images are limited to {MAX_IMAGE_BYTES / 1e6:.0f} MB")
        try:
            image = ImageInput(data, name=Path(name).name)
            check_bytes(image)
        except ImageError as e:
            raise UsageError(f"--image {e}") from None
        out.append(image)
    return tuple(out)


def projector_for(target: Path, args: argparse.Namespace, *, needed: bool) -> Path | None:
    """--mmproj, else the projector beside `target`; with `needed` (pictures were given) and
    none found, one line saying how to give it."""
    from ..models.projector import find_projector, projectors_beside

    given = getattr(args, "mmproj", None)
    if given:
        p = Path(given)
        if not p.is_file():
            raise UsageError(f"--mmproj {given}: no such file")
        return p
    found = find_projector(target)
    if found is None and needed and projectors_beside(target):
        names = ", ".join(p.name for p in projectors_beside(target))
        raise UsageError(f"several projectors lie beside {target.name} ({names}): choose one with --mmproj FILE")
    if found is None and needed:
        raise UsageError(f"{target.name} has no projector beside it (mmproj-*.gguf): give one with --mmproj FILE "
                         "to send images")
    return found
