"""What a user may name a model by: a path, a catalog model id, or the file name of a catalog
or imported model in the store. One resolver for the CLI's --target/--draft and the Python API
(`Engine("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")` after `tandem pull`)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelFileError


def model_file(value: str | os.PathLike[str], role: str = "model") -> Path:
    """The file to load. An existing path is taken as it is; otherwise a catalog id, a catalog
    file name or an imported model's name or file name, found in the store. A name nothing
    matches is a `ModelFileError` saying what was looked for and how to get it."""
    p = Path(value).expanduser()
    if p.exists():
        return p
    text = os.fspath(value)
    if os.sep in text or (os.altsep and os.altsep in text):
        return p  # a path that does not exist: the loader names it
    from . import catalog, store

    try:
        cat = catalog.load()
    except Exception:  # noqa: BLE001 - a broken catalog: fall back to the path, which the loader reports
        cat = None
    if cat is not None:
        ids = [text] if text in cat.models else [m.id for m in cat.models.values()
                                                  if any(f.filename == text for f in m.files)]
        if role in ("target", "draft") and any(cat.models[i].kind == "embedding" for i in ids):
            raise ModelFileError(f"{role} {text!r} is an embedding model (it turns texts into vectors for the "
                                 "Library's ranking, it does not write): name a chat model")
        for model_id in ids:
            found = store.find_model(model_id, cat)
            if found is not None:
                return found
        if ids:
            raise ModelFileError(f"{role} {text!r} is not downloaded yet: run `tandem pull {ids[0]}`")
    for m in store.imported_models():
        if m.exists and text in (m.name, Path(m.path).name):
            return Path(m.path)
    if text.endswith(".gguf"):
        return p  # a file name of no catalog or imported model: the loader says there is no such file
    raise ModelFileError(f"{role} {text!r}: no such file, and not a model id in the catalog (see `tandem models`)")
