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
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..models.calibration import file_id
from .. import paths
from .prompting.chat import Message, chat_tokens
from ..models.compat import kept_verdict, require_target
from ..models.resolve import model_file
from .drafting.choice import DraftChoice, DraftSpec
from .drafting.drafters import Drafter
from .drafting.factory import make_drafter
from ..llamacpp.mtp import SHARED_CACHE_DRAFTERS
from .drafting.suffix_drafter import LEAD_IN, SuffixDrafter
from .drafting.suffix_stores import AnswerStore
from .drafting.history_file import damaged_path
from ..errors import PromptError, TandemError
from ..llamacpp.embedding import EmbeddingContext, embedding_refusal
from .engine_api import BaseEngine
from .events import DoneEvent, Event, RunStats
from ..models.gguf_header import validate_file
from ..llamacpp.llama import Model, supports_gpu_offload
from ..llamacpp.plain_reader import PlainReader, reading_mode
from .drafting.cost_model import CostModel
from .drafting.cost_store import CostStore
from .prompting.prompt_fit import tokenize_within
from .prompting.media import image_prompt, picture_tokens
from ..llamacpp.vision import Projector
from .metrics import append_metrics
from ..llamacpp.rpc_backend import Cluster, connect as rpc_connect
from ..llamacpp.runtime import RuntimeParams, runtime_from
from .request import GenerationRequest, Prompt
from .cancel import CancelToken
from .decoder import Decoder, EngineClosedError
from .prompt_cache import CacheLimits, PromptCache
from .quality import Divergence, first_divergence
from .queue import GenerationQueue

def _encodable(value: Any) -> Any:
    """Text the tokenizer can encode: lone surrogates (from a shell or a careless caller)
    become U+FFFD, with a warning, instead of a UnicodeEncodeError deep in llama.cpp."""
    import warnings
    from .prompting.prompt_text import clean

    if isinstance(value, str):
        text, n = clean(value)
        if n:
            warnings.warn(f"the prompt had {n} undecodable character(s); replaced with U+FFFD", stacklevel=4)
        return text
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [{**m, "content": _encodable(m.get("content"))} for m in value]
    return value


def prompt_tokens(model: Model, prompt: Prompt, *, chat: bool = False, system: str | None = None,
                  limit: int | None = None, tools: Sequence[Mapping[str, Any]] | None = None,
                  parse_special: bool = False, media: bool = False) -> list[int]:
    """Prompt tokens for a model: text (raw or through its chat template), chat messages, or
    token ids. `Engine.tokens_for` and the lookup replay (which has only a vocabulary) share it.

    `limit` (the context size): raise `PromptTooLong` as soon as the prompt clearly cannot
    fit instead of tokenising all of it (see `prompt_fit`). `parse_special`: control-token
    text inside chat messages, or in a raw text prompt, becomes control tokens (unsafe in
    messages, see `chat.chat_tokens`; a raw prompt's writer formatted it with its markup)."""
    prompt, system = _encodable(prompt), _encodable(system) if system else system
    if isinstance(prompt, str):
        if not prompt.strip():
            raise PromptError("the prompt is empty")
        if not chat:
            return tokenize_within(model, prompt, limit, add_special=True, parse_special=parse_special, media=media)
        messages: list[Message] = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
    elif prompt and all(isinstance(t, int) for t in prompt):
        return list(prompt)  # type: ignore[arg-type]
    else:
        messages = list(prompt)  # type: ignore[arg-type]
        if system and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system})
    return chat_tokens(model, messages, limit=limit, tools=tools, parse_special=parse_special, media=media)


class Engine(BaseEngine):
    """One loaded target and the drafters used with it (loaded once, reused), in this process.

    Runtime settings come as a `RuntimeParams` (or the same names as keywords). One
    generation runs at a time per engine: other threads queue; `close()` from any thread
    cancels a running generation, waits for its step to end, then frees the models."""

    def __init__(
        self,
        target: str | os.PathLike[str] | Model,
        *,
        runtime: RuntimeParams | None = None,
        n_ctx: int | None = None,
        n_batch: int | None = None,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        metrics_log: str | os.PathLike[str] | None | bool = True,
        calibration: bool = True,
        on_progress: Callable[[float], bool] | None = None,
        rpc: Sequence[str] | str | Cluster | None = None,
        history_draft: bool = True,
        prompt_cache: bool | CacheLimits = True,
        mmproj: str | os.PathLike[str] | None = None,
        draft_when_needed: bool = False,
        plain_reading: str | None = None,
    ):
        """`rpc`: llama.cpp RPC workers ("HOST:PORT" strings or an `engine.llamacpp.rpc_backend.Cluster`)
        that hold part of the target, split by free memory; drafts always stay local.
        `history_draft`: the suffix drafter keeps past answers in a file per target (in the
        data dir, never sent anywhere); False keeps them in memory only.
        `prompt_cache`: keep read prompts' states (memory and disk, shared by every draft
        choice; `CacheLimits` sets their budgets); False: each decoder keeps only its last prompt.
        `mmproj`: the target's vision projector file: requests may then carry images.
        `plain_reading`: long prompts read through an unrepacked twin of the target when measured
        faster ("auto"), on every prompt ("always") or never ("never"); None: $TANDEM_PLAIN_READING,
        else "auto" (engine/llamacpp/plain_reader.py).
        `draft_when_needed`: a draft model file loads at its first read or proposal, not with its
        decoder (one-shot runs, `tandem generate`: Auto may draft from the free sources alone)."""
        reading = reading_mode(plain_reading)  # a bad one is refused before anything loads
        if not isinstance(target, Model):
            target = model_file(target, "target")  # a path, a catalog id or a file name in the store
            require_target(target)  # not a draft-only file such as Gemma 4's assistant (header only)
        self.runtime = runtime_from(runtime, n_ctx=n_ctx, n_batch=n_batch, n_threads=n_threads, n_gpu_layers=n_gpu_layers)
        self.n_threads = self.runtime.threads
        # [rpc] begin: split the target over RPC workers (engine/llamacpp/rpc_backend.py). Drafts load with
        # llama.cpp's default devices, which never include RPC workers (Tandem does not
        # register them globally), so they stay on this host.
        self.rpc: Cluster | None = None
        target_kw: dict = {"runtime": self.runtime, "on_progress": on_progress}
        if rpc and not isinstance(target, Model):
            header = validate_file(Path(target))  # a bad file is reported before any network
            self.rpc = rpc if isinstance(rpc, Cluster) else rpc_connect(rpc)
            placement = self.rpc.model_kwargs(header)  # devices, split and how many layers leave the CPU
            target_kw["runtime"] = replace(self.runtime, n_gpu_layers=placement.pop("n_gpu_layers"))
            target_kw.update(placement)
        # [rpc] end
        self.target = target if isinstance(target, Model) else Model(target, **target_kw)
        self._owns_target = not isinstance(target, Model)
        self.projector = None if mmproj is None else Projector(  # (a refused one: the target is freed with self)
            self.target, mmproj, n_threads=self.n_threads, batch=self.runtime.n_batch,
            use_gpu=supports_gpu_offload() and self.runtime.n_gpu_layers != 0)
        self._drafts: dict[str, Model] = {}
        self._bridged: set[str] = set()  # drafts of another vocabulary (bridged through text)
        self._decoders: dict[str, Decoder] = {}
        self._attached: list[Any] = []  # built over the target elsewhere (the server's parallel slots)
        self._costs: dict[str, CostModel] = {}
        self._answers: AnswerStore | None = None  # past answers, shared by every suffix drafter
        self._lock = threading.RLock()
        self._embedder: EmbeddingContext | None = None  # made by the first `embed`, freed by `close`
        self._embed_lock = threading.Lock()  # held while the embedder runs: `close` frees it after
        self.queue = GenerationQueue()  # one generation at a time, whichever drafter
        self._closed = False
        self.calibration = calibration
        self.reader = PlainReader(self.target, mode=reading, keep=calibration)
        self._costs_kept = CostStore(self.target, self.n_threads, self.rpc)
        self.history_draft = history_draft
        self.draft_when_needed = draft_when_needed
        self.prompt_cache: PromptCache | None = None
        if not isinstance(prompt_cache, (bool, CacheLimits)) and prompt_cache is not None:
            raise TandemError(f"prompt_cache must be True, False or a CacheLimits, not {type(prompt_cache).__name__}")
        if prompt_cache not in (False, None):
            limits = prompt_cache if isinstance(prompt_cache, CacheLimits) else None
            self.prompt_cache = PromptCache(file_id(self.target.path), limits)
        self.metrics_log: Path | None = paths.metrics_log() if metrics_log is True else \
            None if metrics_log in (False, None) else Path(metrics_log)  # type: ignore[arg-type]

    @property
    def n_gpu_layers(self) -> int | None:
        return self.runtime.n_gpu_layers

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError("this engine was closed: load the model again (engine.setup / Engine(...))")

    # -- drafters ------------------------------------------------------------------------
    def load_draft(self, path: str | os.PathLike[str], on_progress: Callable[[float], bool] | None = None) -> Model:
        """Check compatibility from the headers, then load (once) a draft model."""
        self._check_open()
        p = model_file(path, "draft").resolve()
        key = str(p)
        if key not in self._drafts:
            assistant = validate_file(p).architecture in SHARED_CACHE_DRAFTERS  # an MTP assistant: checked at bind
            verdict = None if assistant else kept_verdict(self.target.path, p, self.target.header)
            self._drafts[key] = Model(p, runtime=self.runtime, on_progress=on_progress)
            if verdict is not None and verdict.bridged:
                self._bridged.add(key)
        return self._drafts[key]

    def decoder(self, draft_model: DraftSpec = None, on_progress: Callable[[float], bool] | None = None) -> Decoder:
        """The decoder (target context + drafter) for a draft choice, created once."""
        self._check_open()
        choice = DraftChoice.parse(draft_model)
        key = choice.key
        with self._lock:
            self._check_open()  # `close` may have run while this thread waited for the lock
            dec = self._decoders.get(key)
            if dec is not None:
                return dec
            rt = self._runtime_here()  # the drafter's context and the target's read the same settings
            drafter = make_drafter(choice, self.target, rt, load_draft=lambda p: self._draft_model(p, on_progress),
                                   history=self._history_drafter, when_needed=self.draft_when_needed)
            cost = self._costs.setdefault(key, CostModel())
            self.seed_cost(cost, drafter)
            dec = Decoder(self.target, drafter, runtime=rt, cost=cost, queue=self.queue, prompt_cache=self.prompt_cache,
                          reader=self.reader)
            self._decoders[key] = dec
            return dec

    def release(self, draft_model: DraftSpec) -> None:
        """Close and forget one draft choice's decoder (its own target context): a drafter
        made for one task, like the bench's, is not kept for the engine's life."""
        key = DraftChoice.parse(draft_model).key
        with self._lock:
            dec = self._decoders.pop(key, None)
            self._costs.pop(key, None)
        if dec is not None:
            dec.close()

    def draft_history_path(self) -> Path:
        """The file the suffix drafter keeps this target's past answers in (token ids)."""
        return paths.draft_history(file_id(self.target.path))

    def clear_draft_history(self) -> None:
        """Forget the suffix drafter's past answers for this target, in memory and on disk."""
        with self._lock:
            for drafter in self._suffix_drafters():
                drafter.clear_history()
            if self._answers is not None:
                self._answers.clear()
        self.draft_history_path().unlink(missing_ok=True)
        damaged_path(self.draft_history_path()).unlink(missing_ok=True)  # one set aside holds answers too

    def set_history_draft(self, on: bool) -> None:
        """Keep the suffix drafter's past answers in the file (on) or in memory only (off), from now."""
        with self._lock:
            self.history_draft = on
            for drafter in self._suffix_drafters():
                drafter.history_path = self.draft_history_path() if on else None

    def slot_drafter(self, draft_model: DraftSpec) -> Drafter | None:
        """A new drafter for a parallel slot's decoder: a free one (the suffix draft over this engine's
        store of past answers), or a draft file's on the draft model this engine loads once (the
        scheduler moves a plain model draft onto its sequence of one batched draft context)."""
        choice, rt = DraftChoice.parse(draft_model), self._runtime_here()
        with self._lock:
            self._check_open()
            return make_drafter(choice, self.target, rt, load_draft=self._draft_model, history=self._history_drafter)

    def _draft_model(self, path: Any, on_progress: Callable[[float], bool] | None = None) -> tuple[Model, bool]:
        """A draft file's Model (loaded once) and whether it is bridged: `make_drafter`'s `load_draft`."""
        dm = self.load_draft(path, on_progress)
        return dm, str(dm.path.resolve()) in self._bridged

    def attach(self, part: Any) -> None:
        """Keep `part` (built over this engine's target elsewhere: the server's parallel slots) until
        this engine closes, and close it first then: its context must go before the target."""
        with self._lock:
            self._check_open()
            self._attached.append(part)

    def detach(self, part: Any) -> bool:
        """Give back an attached part to close now (an app's server switched off); False: closed with this engine."""
        with self._lock:
            return any(p is part for p in self._attached) and not self._attached.remove(part)

    def _history_drafter(self, with_lookup: bool) -> SuffixDrafter:
        """A suffix drafter over this engine's one store of past answers (read once, shared by
        the suffix choice and every model draft's free companion)."""
        d = SuffixDrafter(history_path=self.draft_history_path() if self.history_draft else None,
                          n_vocab=self.target.n_vocab, with_lookup=with_lookup, answers=self._answers)
        self._answers = d.answers
        return d

    def remembers_prompt(self, prompt: Sequence[int]) -> bool:
        """Whether the suffix drafter's memory holds an answer learnt after a prompt that ends
        as `prompt` does (it keeps each answer after the prompt's last LEAD_IN tokens): a race
        asks before its speculative run, which would then replay that answer."""
        tail = [int(t) for t in prompt[-LEAD_IN:]]
        with self._lock:
            self._check_open()
            if self._answers is None and self.history_draft and self.draft_history_path().exists():
                self._history_drafter(with_lookup=False)  # reads the file once; every suffix drafter shares it
            answers = self._answers.answers() if self._answers is not None else []
        return bool(tail) and any(len(a) > len(tail) and a[:len(tail)].tolist() == tail for a in answers)

    def _suffix_drafters(self) -> list[SuffixDrafter]:
        """The drafters that keep past answers, in every decoder of this engine."""
        found = [dec.drafter.history_drafter for dec in self._decoders.values() if dec.drafter is not None]
        return [d for d in found if isinstance(d, SuffixDrafter)]

    def _runtime_here(self) -> RuntimeParams:
        """The runtime with the thread count resolved (contexts and calibration keys agree on it)."""
        return replace(self.runtime, n_threads=self.n_threads)

    # -- calibration persisted per machine and model (cost_store.py) --------------------------
    def calibration_key(self) -> str:
        """The key this target's measured pass costs persist under (engine/models/calibration.py)."""
        return self._costs_kept.keys(None)[0]

    def seed_cost(self, cost: CostModel, drafter: Drafter | None) -> None:
        """Seed `cost` (a decoder's, or a parallel slots' draft name's) with what this machine
        measured for this target and `drafter` before: the calibration store."""
        if self.calibration:
            self._costs_kept.seed(cost, drafter)

    def forget_prompts(self) -> None:
        """Empty every loaded decoder's KV caches. The prompt cache stays: a run that must read
        its whole prompt also asks for none (`prompt_cache=False`, as the race and the bench do)."""
        with self._lock:
            decoders = list(self._decoders.values())
        for d in decoders:
            d.forget_prompts()

    def clear_prompt_cache(self) -> None:
        """Forget every read prompt this target's prompt cache keeps, in memory and on disk."""
        if self.prompt_cache is not None:
            self.prompt_cache.clear()

    # -- prompts -------------------------------------------------------------------------
    def tokens_for(self, prompt: Prompt, *, chat: bool = False, system: str | None = None,
                   limit: int | None = None, tools: Sequence[Mapping[str, Any]] | None = None,
                   parse_special: bool = False, media: bool = False) -> list[int]:
        """Prompt tokens: text (raw or through the chat template), chat messages, or token ids.
        `media`: media markers become IMAGE_SLOT entries (see `prompt_input`).

        `limit`: stop counting with `PromptTooLong` once the prompt cannot fit that many tokens.
        `parse_special`: control-token text inside chat messages (unsafe) or a raw text prompt
        becomes control tokens."""
        self._check_open()
        with self._lock:
            self._check_open()  # the target is freed under this lock: never tokenise with a freed one
            return prompt_tokens(self.target, prompt, chat=chat, system=system, limit=limit, tools=tools,
                                 parse_special=parse_special, media=media)

    # -- embeddings ----------------------------------------------------------------------
    def embedding_tokens(self, text: str, *, limit: int | None = None) -> list[int]:
        """An embedding input's tokens, as a raw text prompt is tokenised (special tokens added,
        special-token text read as text); `limit`: `PromptTooLong` once it cannot fit."""
        self._check_open()
        with self._lock:
            self._check_open()
            return tokenize_within(self.target, _encodable(text), limit, add_special=True, parse_special=False)

    def embeddings_refusal(self) -> str | None:
        self._check_open()
        return embedding_refusal(self.target)

    def embed(self, inputs: Sequence[Sequence[int]], *, cancel: CancelToken | None = None) -> list[Any]:
        """One L2-normalised, mean-pooled vector (numpy float32) per token list, from the target.

        Takes a turn in `queue` (or runs in the caller's), so it never overlaps a generation;
        the embedding context is made on first use and leaves the generation contexts alone."""
        self._check_open()

        def stop() -> bool:  # the caller cancelled, or `close()` wants the context freed
            return self._closed or (cancel is not None and cancel.cancelled)

        with self.queue.hold(), self._embed_lock:
            self._check_open()
            if self._embedder is None:
                self._embedder = EmbeddingContext(self.target, self._runtime_here())
            return [self._embedder.embed(tokens, stop) for tokens in inputs]

    # -- generation ----------------------------------------------------------------------
    def stream(self, prompt: Prompt | GenerationRequest, *, cancel: CancelToken | None = None, **options: Any) -> Iterator[Event]:
        """Yield `PrefillEvent`, `TokenEvent`, `StepEvent` and finally a `DoneEvent`.

        `prompt` is a str, chat messages, token ids, or a whole `GenerationRequest`; the
        keywords are those of `GenerationRequest.from_options` (draft_model, lookahead,
        max_tokens, temperature, top_k, top_p, min_p, seed, stop, chat, system, tag, logit_bias,
        penalties, logprobs, grammar: GBNF text with a `root` rule, json_schema: a dict,
        parse_special: read control-token text in chat messages (unsafe) or a raw text prompt as
        control tokens, images: pictures for a target loaded with its projector, `mmproj`).
        Inputs are checked here, before anything runs."""
        self._check_open()
        req = self.request(prompt, **options)
        prompt = self.prompt_input(req)
        return self._run(self.decoder(req.draft), prompt, req, cancel)

    def prompt_input(self, req: GenerationRequest) -> tuple[list[int], list[Any]]:
        """The request's prompt tokens and its pictures' `ImageSpan`s in them (decoded in bounds, encoded once)."""
        def tokens(prompt: Prompt, media: bool = False) -> list[int]:
            return self.tokens_for(prompt, chat=req.chat, system=req.system, limit=self.n_ctx,
                                   parse_special=req.parse_special, media=media)
        with self._lock:  # the projector is freed under it
            return (tokens(req.prompt), []) if not req.images else image_prompt(
                self.projector, lambda p: tokens(p, True), req.prompt, req.images, self.target.path.name)

    def image_tokens(self, images: Sequence[Any]) -> list[int]:
        """Each picture's prompt tokens with the projector, counted, not encoded (media.picture_tokens)."""
        with self._lock:  # the projector is freed under it
            self._check_open()
            return picture_tokens(self.projector, images, self.target.path.name)

    def _run(self, dec: Decoder, prompt: tuple[list[int], list], req: GenerationRequest, cancel: CancelToken | None) -> Iterator[Event]:
        for ev in dec.run(prompt[0], req, cancel, images=prompt[1]):
            if isinstance(ev, DoneEvent):
                self._log(ev.stats, dec, req)
                if self.calibration:
                    self._costs_kept.save(dec.cost, dec.drafter)
            yield ev

    def first_divergence(self, prompt: Sequence[int], reference: Sequence[int], other: Sequence[int],
                         images: Sequence[Any] = (), ends: bool = False, stepwise: bool = False) -> Divergence | None:
        self._check_open()
        with self._lock:  # its own context on the target: `close` must not free the target under it
            self._check_open()
            return first_divergence(self.target, prompt, reference, other, images=images, ends=ends, reader=self.reader,
                                     stepwise=stepwise)

    def _log(self, stats: RunStats, dec: Decoder, req: GenerationRequest) -> None:
        if self.metrics_log is None:
            return
        draft = None
        if dec.drafter is not None:
            draft = dec.drafter.model.path.name if dec.drafter.model is not None else dec.drafter.kind
        append_metrics(self.metrics_log, {"target": self.target.path.name, "draft": draft, "task": req.tag,
                                          "settings": req.sampling.to_dict(), "stats": stats.to_dict()})

    def close(self) -> None:
        """Cancel a running generation, wait for its step to end, then free everything.
        Safe from any thread, and more than once; later use raises `EngineClosedError`."""
        if self._closed:
            return
        self._closed = True
        with self._lock:  # a decoder still being made in another thread is finished, and closed here
            for part in self._attached:  # first: their contexts read the target
                part.close()
            self._attached.clear()
            for d in list(self._decoders.values()):
                d.close()  # cancels its run and waits for the llama.cpp call in progress
        with self._embed_lock:  # a running embed stops at its next chunk (`_closed`), then it is freed
            if self._embedder is not None:
                self._embedder.close()
                self._embedder = None
        if self.prompt_cache is not None:  # its files being written are finished, then its memory freed
            self.prompt_cache.close()
        with self._lock:
            self._decoders.clear()
            if self.projector is not None:
                self.projector.close()
            for m in self._drafts.values():
                m.close()
            self._drafts.clear()
            self.reader.close()
            if self._owns_target:
                self.target.close()
