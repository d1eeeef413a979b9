"""Requantising a model file with llama.cpp's own `llama_model_quantize` (the draft optimiser)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import llama_cpp

from ..errors import ModelLoadError
from ..models.gguf_header import validate_file
from .llama import default_threads, ensure_backend, log_tail, recent_log_errors


class QuantizeError(ModelLoadError):
    """llama.cpp could not write a requantised copy of a model."""


def quant_types() -> dict[str, int]:
    """llama.cpp's file types by lowercase name ("q4_0", "q8_0", "q4_k_m", ...), read from
    the bound library's own LLAMA_FTYPE_* constants rather than copied numbers."""
    out: dict[str, int] = {}
    for attr in dir(llama_cpp):
        for prefix in ("LLAMA_FTYPE_MOSTLY_", "LLAMA_FTYPE_ALL_"):
            if attr.startswith(prefix):
                out[attr[len(prefix):].lower()] = int(getattr(llama_cpp, attr))
    return out


def quantize(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    qtype: str,
    *,
    allow_requantize: bool = True,
    n_threads: int | None = None,
    token_embedding_type: str | None = None,
    output_tensor_type: str | None = None,
) -> Path:
    """Write `src` requantised to `qtype` at `dst` with llama.cpp's `llama_model_quantize`.

    `allow_requantize` lets already-quantised tensors be converted (a Q4_K_M download to
    Q4_0); llama.cpp picks each tensor's type itself and falls back per tensor where a row
    width does not fit the type's block. `token_embedding_type` / `output_tensor_type` (ggml
    type names such as "q4_0") override its choice for those two tensors. The file appears
    at `dst` only once complete (written beside it, then renamed). Not interruptible: a
    0.5B model takes seconds to tens of seconds on a CPU.
    """
    src_p, dst_p = Path(src), Path(dst)
    validate_file(src_p)  # ModelFileError naming the file, before llama.cpp sees it
    types = quant_types()
    if qtype.lower() not in types:
        raise QuantizeError(f"unknown quantisation type {qtype!r}; known: {', '.join(sorted(types))}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = types[qtype.lower()]
    params.allow_requantize = allow_requantize
    params.nthread = n_threads or default_threads()
    for field_name, value in (("token_embedding_type", token_embedding_type), ("output_tensor_type", output_tensor_type)):
        if value is not None:
            import gguf

            try:
                setattr(params, field_name, int(gguf.GGMLQuantizationType[value.upper()]))
            except KeyError:
                raise QuantizeError(f"unknown tensor type {value!r} for {field_name}") from None
    ensure_backend()
    dst_p.parent.mkdir(parents=True, exist_ok=True)
    partial = dst_p.with_name(dst_p.name + ".partial")
    log_tail.clear()
    try:
        rc = llama_cpp.llama_model_quantize(os.fsencode(src_p), os.fsencode(partial), ctypes.byref(params))
    except OSError as e:  # pragma: no cover - disk full surfaces as rc != 0 in practice
        partial.unlink(missing_ok=True)
        raise QuantizeError(f"{src_p}: quantisation to {qtype} failed ({e})") from None
    if rc != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        detail = recent_log_errors() or f"llama_model_quantize returned {rc}"
        raise QuantizeError(f"{src_p}: quantisation to {qtype} failed ({detail})")
    os.replace(partial, dst_p)
    return dst_p
