"""How models are loaded and run: context, batch, threads, GPU layers, in one object.

Every constructor that loads a model or makes a context takes a `RuntimeParams` (Model,
Context, ModelDrafter, Decoder, Engine, the app's load worker), so a setting chosen at the
edge reaches llama.cpp without being spelled out again on the way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ..errors import TandemError


@dataclass(frozen=True)
class RuntimeParams:
    """How models are loaded and run: one object for every constructor that needs it."""

    n_ctx: int = 4096
    n_batch: int = 512
    n_threads: int | None = None  # None: the physical cores this process may use
    n_gpu_layers: int | None = None  # None: all layers when llama.cpp can offload

    def __post_init__(self) -> None:
        for name, what in (("n_ctx", "the context size"), ("n_batch", "the batch size")):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 16:
                raise TandemError(f"{what} ({name}) must be an integer of at least 16 tokens, got {v!r}")
        if self.n_threads is not None and (not isinstance(self.n_threads, int) or self.n_threads < 1):
            raise TandemError(f"n_threads must be a positive integer, got {self.n_threads!r}")

    @property
    def threads(self) -> int:
        from ..models.hardware import physical_cores

        return self.n_threads or physical_cores()


def runtime_from(runtime: RuntimeParams | None = None, *, n_ctx: int | None = None, n_batch: int | None = None,
                 n_threads: int | None = None, n_gpu_layers: int | None = None) -> RuntimeParams:
    """`runtime` (or the defaults) with the loose keyword options an engine accepts laid over it."""
    rt = runtime or RuntimeParams()
    given = {k: v for k, v in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_threads", n_threads),
                               ("n_gpu_layers", n_gpu_layers)) if v is not None}
    return replace(rt, **given) if given else rt


def _setting(what: str, env: str, modes: tuple[str, ...], default: str, mode: str | None) -> str:
    """`mode`, else $`env`, else `default`; one line naming the setting when it is none of `modes`."""
    chosen = mode if mode is not None else (os.environ.get(env) or default)
    if chosen not in modes:
        where = "" if mode is not None else f" ({env})"
        raise TandemError(f"{what}{where} must be one of {', '.join(modes)}, not {chosen!r}")
    return chosen


FLASH_ATTN_MODES = ("auto", "on", "off")


def flash_attention(mode: str | None = None) -> bool | None:
    """Whether contexts compute attention with llama.cpp's flash-attention kernel: True, False,
    or None for llama.cpp's own choice ("auto", the default; on wherever the kernel exists, the
    CPU included). `mode` None: $TANDEM_FLASH_ATTN, else "auto".

    "off" is faster on some CPUs and costs exactness there: measured here (AMD EPYC, AVX-512,
    docs/benchmarks.md §21) a verify pass of 8-16 tokens at a 1,536-3,000-token depth costs
    16-28% less without the kernel, but the kernel reads each query row alone, the same in a
    pass of one token or sixteen, where the plain path's matrix products round a batch
    differently: with it off, SmolLM2 drafting for itself was accepted 86% (not 100%) and an
    answer with a draft parted from the target's alone. Every context of a process takes the
    same answer, so a KV state still moves between them (llama.cpp stores V transposed without
    the kernel and refuses a state made the other way), and the prompt cache's key names it."""
    chosen = _setting("flash attention", "TANDEM_FLASH_ATTN", FLASH_ATTN_MODES, "auto", mode)
    return None if chosen == "auto" else chosen == "on"


REPACK_MODES = ("on", "off")


def weight_repacking(mode: str | None = None) -> bool:
    """Whether models load with llama.cpp's weight repacking (its interleaved CPU layouts, e.g.
    `q4_K_8x8`): "on", the default, or "off" (llama.cpp's `--no-repack`). `mode` None:
    $TANDEM_REPACK, else "on".

    "off" buys exactness at a speed cost, measured here (AMD EPYC, AVX-512, docs/benchmarks.md
    §22): the repacked weights multiply one to three rows with one kernel and four or more with
    another, which rounds differently, so a verify pass or the parallel slots' shared pass can
    part from a one-token step at a near-tie (4 chats at once: 1-2 of 4 texts as each alone);
    unrepacked, passes of up to 7 rows round as one-token steps (a median 3 of 4), and the load
    is ~0.7 s shorter, while one token is written about 9% slower and a pass of 2-4 tokens
    1.3-1.7x slower. Where llama.cpp repacks nothing (GPUs, Metal, CPUs without those kernels)
    the two are the same."""
    return _setting("weight repacking", "TANDEM_REPACK", REPACK_MODES, "on", mode) == "on"


__all__ = ["FLASH_ATTN_MODES", "REPACK_MODES", "RuntimeParams", "flash_attention", "runtime_from", "weight_repacking"]
