"""The Python API: load a target once, then generate with any drafter and lookahead.

    from engine import Engine
    eng = Engine("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    out = eng.generate("def fib(n):", draft_model="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", lookahead=5)
    print(out.text, out.stats.acceptance_rate)

`engine.setup(...)` / `engine.generate(...)` / `engine.stream(...)` do the same on a
module-level default engine.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence, Union

from . import paths
from .chat import Message, chat_tokens
from .compat import require_compatible
from .drafters import Drafter, ModelDrafter, PromptLookupDrafter
from .errors import PromptError, TandemError
from .events import DoneEvent, Event, RunStats, StepEvent, TokenEvent, append_metrics
from .gguf_header import validate_file
from .llama import Model, default_threads
from .lookahead import CostModel, Lookahead, parse_lookahead
from .rpc import Cluster, connect as rpc_connect
from .sampling import SamplingParams
from .speculative import CancelToken, Decoder, GenerationConfig

DraftSpec = Union[str, os.PathLike, Model, Drafter, None]
Prompt = Union[str, Sequence[Message]]


@dataclass
class GenerationResult:
    text: str
    tokens: list[int]
    stats: RunStats
    token_events: list[TokenEvent] = field(default_factory=list)
    step_events: list[StepEvent] = field(default_factory=list)


class Engine:
    """One loaded target and the drafters used with it (loaded once, reused)."""

    def __init__(
        self,
        target: str | os.PathLike[str] | Model,
        *,
        n_ctx: int = 4096,
        n_batch: int = 512,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        metrics_log: str | os.PathLike[str] | None | bool = True,
        on_progress: Callable[[float], bool] | None = None,
        rpc: Sequence[str] | str | Cluster | None = None,
    ):
        """`rpc`: llama.cpp RPC workers ("HOST:PORT" strings or an `engine.rpc.Cluster`)
        that hold part of the target, split by free memory; drafts always stay local."""
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        self.n_threads = n_threads or default_threads()
        self.n_gpu_layers = n_gpu_layers
        # [rpc] begin: split the target over RPC workers (engine/rpc.py). Drafts load with
        # llama.cpp's default devices, which never include RPC workers (Tandem does not
        # register them globally), so they stay on this host.
        self.rpc: Cluster | None = None
        target_kw: dict = {"n_gpu_layers": n_gpu_layers, "on_progress": on_progress}
        if rpc and not isinstance(target, Model):
            header = validate_file(Path(target))  # a bad file is reported before any network
            self.rpc = rpc if isinstance(rpc, Cluster) else rpc_connect(rpc)
            target_kw.update(self.rpc.model_kwargs(header))
        # [rpc] end
        self.target = target if isinstance(target, Model) else Model(target, **target_kw)
        self._owns_target = not isinstance(target, Model)
        self._drafts: dict[str, Model] = {}
        self._decoders: dict[str, Decoder] = {}
        self._costs: dict[str, CostModel] = {}
        self._lock = threading.Lock()
        if metrics_log is True:
            self.metrics_log: Path | None = paths.metrics_log()
        elif metrics_log in (False, None):
            self.metrics_log = None
        else:
            self.metrics_log = Path(metrics_log)  # type: ignore[arg-type]

    # -- drafters ------------------------------------------------------------------------
    def _draft_key(self, draft: DraftSpec) -> str:
        if draft is None or (isinstance(draft, str) and draft.lower() in ("none", "")):
            return "none"
        if isinstance(draft, str) and draft.lower() == "lookup":
            return "lookup"
        if isinstance(draft, Model):
            return f"model:{draft.path.resolve()}:{id(draft)}"
        if isinstance(draft, Drafter):
            return f"drafter:{id(draft)}"
        return f"path:{Path(draft).resolve()}"

    def load_draft(self, path: str | os.PathLike[str], on_progress: Callable[[float], bool] | None = None) -> Model:
        """Check compatibility from the headers, then load (once) a draft model."""
        p = Path(path).resolve()
        key = str(p)
        if key not in self._drafts:
            require_compatible(self.target.header, Path(path))
            self._drafts[key] = Model(p, n_gpu_layers=self.n_gpu_layers, on_progress=on_progress)
        return self._drafts[key]

    def decoder(self, draft_model: DraftSpec = None, on_progress: Callable[[float], bool] | None = None) -> Decoder:
        """The decoder (target context + drafter) for a draft choice, created once."""
        key = self._draft_key(draft_model)
        with self._lock:
            dec = self._decoders.get(key)
            if dec is not None:
                return dec
            drafter: Drafter | None
            if key == "none":
                drafter = None
            elif key == "lookup":
                drafter = PromptLookupDrafter()
            elif isinstance(draft_model, Drafter):
                drafter = draft_model
            else:
                if isinstance(draft_model, Model):
                    require_compatible(self.target.header, draft_model.header)
                    dm = draft_model
                else:
                    dm = self.load_draft(draft_model, on_progress)  # type: ignore[arg-type]
                drafter = ModelDrafter(dm, n_ctx=self.n_ctx, n_batch=self.n_batch, n_threads=self.n_threads, target_vocab=self.target.n_vocab)
            cost = self._costs.setdefault(key, CostModel())
            dec = Decoder(self.target, drafter, None, n_ctx=self.n_ctx, n_batch=self.n_batch, n_threads=self.n_threads, cost=cost)
            self._decoders[key] = dec
            return dec

    # -- prompts -------------------------------------------------------------------------
    def tokens_for(self, prompt: Prompt, *, chat: bool = False, system: str | None = None) -> list[int]:
        if isinstance(prompt, str):
            if not prompt.strip():
                raise PromptError("the prompt is empty")
            if not chat:
                return self.target.tokenize(prompt, add_special=True, parse_special=False)
            messages: list[Message] = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": prompt}
            ]
        else:
            messages = list(prompt)
            if system and not any(m.get("role") == "system" for m in messages):
                messages.insert(0, {"role": "system", "content": system})
        return chat_tokens(self.target, messages)

    # -- generation ----------------------------------------------------------------------
    def stream(
        self,
        prompt: Prompt,
        *,
        draft_model: DraftSpec = None,
        lookahead: int | str | Lookahead = 5,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        chat: bool = False,
        system: str | None = None,
        cancel: CancelToken | None = None,
        tag: str | None = None,
    ) -> Iterator[Event]:
        """Yield `PrefillEvent`, `TokenEvent`, `StepEvent` and finally a `DoneEvent`."""
        if max_tokens < 1:
            raise TandemError(f"max_tokens must be >= 1, got {max_tokens}")
        params = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)
        tokens = self.tokens_for(prompt, chat=chat, system=system)
        dec = self.decoder(draft_model)
        dec.lookahead = parse_lookahead(lookahead) if dec.drafter is not None else parse_lookahead(0)
        cfg = GenerationConfig(max_tokens=max_tokens, stop=tuple(stop), sampling=params)
        for ev in dec.run(tokens, cfg, cancel):
            if isinstance(ev, DoneEvent):
                self._log(ev.stats, dec, params, tag)
            yield ev

    def generate(self, prompt: Prompt, **kw: object) -> GenerationResult:
        """Run to completion; returns text, tokens, stats and the token/step events."""
        toks: list[TokenEvent] = []
        steps: list[StepEvent] = []
        for ev in self.stream(prompt, **kw):  # type: ignore[arg-type]
            if isinstance(ev, TokenEvent):
                toks.append(ev)
            elif isinstance(ev, StepEvent):
                steps.append(ev)
            elif isinstance(ev, DoneEvent):
                return GenerationResult(ev.text, ev.tokens, ev.stats, toks, steps)
        raise TandemError("generation ended without a result")  # pragma: no cover

    def _log(self, stats: RunStats, dec: Decoder, params: SamplingParams, tag: str | None) -> None:
        if self.metrics_log is None:
            return
        draft = None
        if dec.drafter is not None:
            m = getattr(dec.drafter, "model", None)
            draft = m.path.name if m is not None else dec.drafter.kind
        append_metrics(
            self.metrics_log,
            {
                "target": self.target.path.name,
                "draft": draft,
                "task": tag,
                "settings": params.to_dict(),
                "stats": stats.to_dict(),
            },
        )

    def close(self) -> None:
        for d in self._decoders.values():
            d.close()
        self._decoders.clear()
        for m in self._drafts.values():
            m.close()
        self._drafts.clear()
        if self._owns_target:
            self.target.close()
