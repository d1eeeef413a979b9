"""A target split over RPC workers, run in a child process so a lost worker cannot end ours.

llama.cpp's RPC client has no error path: when a worker dies or stops answering in the
middle of a pass, ggml aborts (or blocks forever in `recv`). In the CLI that is one clear
line and exit 2 (engine/llamacpp/rpc_backend.py); the desktop app must stay up instead. `RemoteEngine`
therefore loads `Engine(target, rpc=...)` in a spawned child and speaks to it over a pipe,
with the same calls the app, the race, the bench and the server use (`stream`, `generate`,
`tokens_for`, `decoder`, `close`, `target`, `n_ctx`, `rpc`). When the child dies, or sends
nothing for `hang_timeout` seconds, the child is killed and the caller gets one
`RemoteWorkerLost` naming the worker(s) that no longer answer. Engines without workers
stay in-process: this costs a process start and a pipe hop per event, nothing more.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..llamacpp import rpc_backend as rpc
from ..llamacpp import rpc_backend as rpc_mod  # `rpc` is also RemoteEngine's keyword, as in Engine
from ..decoding.engine_api import BaseEngine
from .remote_child import _child_main, _unpack_error
from ..decoding.queue import GenerationQueue
from ..errors import TandemError
from ..decoding.events import Event
from ..llamacpp.runtime import RuntimeParams, runtime_from
from ..decoding.request import GenerationRequest
from ..decoding.engine import prompt_tokens
from ..llamacpp.llama import Model

DEFAULT_HANG_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 3.0
LOAD_TIMEOUT_S = 120.0
# After Stop a healthy child ends within the step it is in: silence longer than this many of
# the slowest steps seen so far (at least STOP_GRACE_S) means a worker hung, and Stop should
# not wait the whole hang timeout to say so. Before the first step (prefill, whose length
# is unknown) the hang timeout applies as before.
STOP_GRACE_S = 5.0
STOP_STEPS = 4
_POLL_S = 0.05


class RemoteWorkerLost(rpc.RpcError):
    """A worker holding part of the target died or stopped answering; the engine is gone.

    `endpoints`: the workers found not answering (all of them when none could be singled out)."""

    def __init__(self, message: str, endpoints: Sequence[str] = ()):
        super().__init__(message)
        self.endpoints = list(endpoints)

    def __reduce__(self):  # keep `endpoints` when pickled
        return (type(self), (str(self), self.endpoints))


@dataclass
class RemoteCluster:
    """What the parent knows of the workers (the handles live in the child)."""

    endpoints: list[str]
    shares: list[tuple[str, float]] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return [e.partition(":")[0] for e in self.endpoints]

    def describe(self) -> str:
        return ", ".join(f"{who} {frac:.0%}" for who, frac in self.shares)


class RemoteTarget:
    """The parent's view of the target: metadata at hand, and the vocabulary loaded here.

    Tokenising never crosses the pipe: the child's pipe is held for a whole answer, and the
    chat's token meter counts on the GUI thread while one streams (a wait there froze the
    window). A vocabulary-only load reads no weights, and gives the child's exact tokens."""

    def __init__(self, vocab: Model, path: Path, info: dict):
        self._vocab = vocab
        self.path = path
        self.name: str = info["name"]
        self.architecture: str = info["architecture"]
        self.chat_template: str | None = info["chat_template"]
        self.n_vocab: int = info["n_vocab"]
        self.n_gpu_layers: int = info["n_gpu_layers"]

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> list[int]:
        return self._vocab.tokenize(text, add_special=add_special, parse_special=parse_special)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self._vocab.detokenize(tokens)

    def piece(self, token: int, *, special: bool = False) -> bytes:
        return self._vocab.piece(int(token), special=special)

    def token_text(self, token: int) -> str:
        return self._vocab.token_text(int(token))

    def is_eog(self, token: int) -> bool:
        return self._vocab.is_eog(int(token))

    def fim_tokens(self) -> Any:
        return self._vocab.fim_tokens()

    @property
    def add_bos(self) -> bool:
        return self._vocab.add_bos

    @property
    def bos(self) -> int:
        return self._vocab.bos


# -- the parent ---------------------------------------------------------------------------------
def _lost_endpoints(endpoints: Sequence[str], timeout: float) -> list[str]:
    """The workers that no longer answer a probe (refused, silent, or broken), in parallel."""
    def dead(ep: str) -> bool:
        try:
            rpc.probe(ep, timeout=timeout)
            return False
        except rpc.RpcError:
            return True

    with ThreadPoolExecutor(max_workers=max(1, len(endpoints))) as pool:
        flags = list(pool.map(dead, endpoints))
    return [ep for ep, d in zip(endpoints, flags) if d]


class RemoteEngine(BaseEngine):
    """`Engine(target, rpc=endpoints)` in a child process, with a parent-side proxy.

    `hang_timeout`: seconds without any event from the child (a token, a step, a progress
    tick) before the worker counts as lost (loading waits at least `LOAD_TIMEOUT_S`: big
    tensors cross the network between progress ticks); `connect_timeout`: the per-endpoint
    pre-check done here before anything starts; `on_lost(error)`: called once, on the
    calling thread, when a worker is lost. One request at a time (others wait)."""

    def __init__(
        self,
        target: str | os.PathLike[str],
        *,
        rpc: str | Sequence[str],
        weights: Sequence[float] | None = None,
        runtime: RuntimeParams | None = None,
        n_ctx: int | None = None,
        n_batch: int | None = None,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        metrics_log: str | os.PathLike[str] | None | bool = True,
        calibration: bool = True,
        on_progress: Callable[[float], bool] | None = None,
        hang_timeout: float = DEFAULT_HANG_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        on_lost: Callable[[RemoteWorkerLost], None] | None = None,
        history_draft: bool = True,
    ):
        from ..models.gguf_header import validate_file
        from ..models.resolve import model_file

        self.path = model_file(target, "target")
        validate_file(self.path)  # a bad file is reported before any network or process
        self.endpoints = rpc_mod.parse_endpoints(rpc)
        for ep in self.endpoints:  # the connect pre-check: a wrong port is one fast line
            rpc_mod.probe(ep, timeout=connect_timeout)
        self.runtime = runtime_from(runtime, n_ctx=n_ctx, n_batch=n_batch, n_threads=n_threads, n_gpu_layers=n_gpu_layers)
        self.hang_timeout = float(hang_timeout)
        self.connect_timeout = float(connect_timeout)
        self.calibration = calibration
        self.load_timeout = max(self.hang_timeout, LOAD_TIMEOUT_S)
        self.on_lost: Callable[[RemoteWorkerLost], None] | None = None  # set once loaded: a failed load is its own error
        self._lock = threading.RLock()
        self.queue = GenerationQueue()  # one generation at a time, as in a local Engine
        self._closed = False
        self._lost: RemoteWorkerLost | None = None
        ctx = mp.get_context("spawn")
        self._conn, child_conn = ctx.Pipe()
        child_ctrl, self._ctrl = ctx.Pipe(duplex=False)
        spec = {"target": str(self.path), "endpoints": self.endpoints, "weights": list(weights) if weights else None,
                "runtime": self.runtime, "metrics_log": metrics_log, "calibration": calibration,
                "connect_timeout": connect_timeout, "history_draft": history_draft}
        self._proc = ctx.Process(target=_child_main, args=(child_conn, child_ctrl, spec), name="tandem-rpc-target", daemon=True)
        self._proc.start()
        child_conn.close()
        child_ctrl.close()
        with self._lock:
            info = self._await_ready(on_progress)
        try:
            self._vocab: Model | None = Model(self.path, vocab_only=True)
        except BaseException:
            self.close()
            raise
        self.target = RemoteTarget(self._vocab, self.path, info)
        self.rpc = RemoteCluster(list(self.endpoints), [tuple(s) for s in info["shares"]])
        self.on_lost = on_lost

    # -- attributes the callers read ------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def lost(self) -> RemoteWorkerLost | None:
        """The error that ended this engine, if a worker was lost."""
        return self._lost

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    # -- the pipe ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._lost is not None:
            raise RemoteWorkerLost(str(self._lost), self._lost.endpoints)
        if self._closed:
            from ..decoding.decoder import EngineClosedError

            raise EngineClosedError("this engine was closed: load the model again")

    def _fail(self, why: str, hung: bool, waited: float = 0.0, stopping: bool = False) -> RemoteWorkerLost:
        """Kill the child, find the worker(s) that stopped answering, remember the error."""
        self._kill()
        lost = _lost_endpoints(self.endpoints, timeout=min(2.0, self.connect_timeout))
        who = ", ".join(lost) if lost else " or ".join(self.endpoints)
        if hung and stopping:
            msg = (f"RPC worker {who} stopped answering: nothing came back within {waited:g} s of Stop; "
                   "the split target is gone. Restart the worker and load again, or reload the model locally")
        elif hung:
            msg = (f"RPC worker {who} stopped answering: nothing came back for {waited:g} s; "
                   "the split target is gone. Restart the worker and load again, or reload the model locally")
        else:
            msg = (f"RPC worker {who} was lost mid-generation ({why}); the split target is gone. "
                   "Restart the worker and load again, or reload the model locally")
        self._lost = RemoteWorkerLost(msg, lost or self.endpoints)
        self._closed = True
        if self.on_lost is not None:
            try:
                self.on_lost(self._lost)
            except Exception:  # noqa: BLE001 - a listener's bug must not hide the error itself
                pass
        return self._lost

    def _recv(self, cancel: Any = None, on_tick: Callable[[], None] | None = None, timeout: float | None = None,
              stop_limit: float | None = None, stopping: bool = False) -> tuple:
        """The next message from the child, or RemoteWorkerLost when it died or went silent
        (for `timeout` seconds, or `stop_limit` seconds once `cancel()` said Stop)."""
        limit = self.hang_timeout if timeout is None else timeout
        last = time.monotonic()
        while True:
            if on_tick is not None:
                on_tick()
            if cancel is not None and cancel():
                self._send_ctrl(("cancel",))
                cancel = None  # once
                if stop_limit is not None:
                    limit, last, stopping = min(limit, stop_limit), time.monotonic(), True
            if self._conn.poll(_POLL_S):
                try:
                    msg = self._conn.recv()
                except (EOFError, OSError):
                    if self._closed and self._lost is None:
                        from ..decoding.decoder import EngineClosedError

                        raise EngineClosedError("this engine was closed while it was working") from None
                    raise self._fail(self._exit_text(), hung=False) from None
                if msg[0] == "fatal":
                    self._proc.join(5)
                    raise self._fail(rpc.abort_reason(msg[1]), hung=False)
                return msg
            if not self._proc.is_alive() and not self._conn.poll(0):
                if self._closed and self._lost is None:
                    from ..decoding.decoder import EngineClosedError

                    raise EngineClosedError("this engine was closed while it was working")
                raise self._fail(self._exit_text(), hung=False)
            if time.monotonic() - last > limit:
                raise self._fail("", hung=True, waited=limit, stopping=stopping)

    def _exit_text(self) -> str:
        self._proc.join(2)
        code = self._proc.exitcode
        if code is None:
            return "no reply"
        return f"the process holding the target ended with code {code}" if code >= 0 else f"the process holding the target was killed by signal {-code}"

    def _send(self, msg: tuple) -> None:
        try:
            self._conn.send(msg)
        except (OSError, ValueError):
            raise self._fail(self._exit_text(), hung=False) from None

    def _send_ctrl(self, msg: tuple) -> None:
        try:
            self._ctrl.send(msg)
        except (OSError, ValueError):
            pass  # the child is gone: the next receive says so

    def _await_ready(self, on_progress: Callable[[float], bool] | None) -> dict:
        heard = False
        while True:
            try:
                msg = self._recv(timeout=self.load_timeout)
                heard = True
            except RemoteWorkerLost as e:  # during loading: not mid-generation
                if not heard and self._proc.exitcode is not None:  # it never got going: not the workers' fault
                    raise rpc_mod.RpcError(
                        f"the process that loads the target over RPC ended before it started ({self._exit_text()}); "
                        "in a script, create the engine under `if __name__ == \"__main__\":` (multiprocessing "
                        "spawns a fresh interpreter that imports the script)") from None
                self._lost = RemoteWorkerLost(str(e).replace("was lost mid-generation", "was lost while loading"), e.endpoints)
                raise self._lost from None
            if msg[0] == "progress":
                if on_progress is not None and on_progress(msg[2]) is False:
                    self._send_ctrl(("cancel",))
            elif msg[0] == "ready":
                return msg[1]
            elif msg[0] == "error":
                self._kill()
                self._closed = True
                raise _unpack_error(*msg[1:])

    def _result(self, on_progress: Callable[[float], bool] | None = None, timeout: float | None = None) -> Any:
        while True:
            msg = self._recv(timeout=timeout)
            if msg[0] == "result":
                return msg[1]
            if msg[0] == "error":
                raise _unpack_error(*msg[1:])
            if msg[0] == "progress" and on_progress is not None:
                on_progress(msg[2])

    def _call(self, name: str, args: tuple, kwargs: dict) -> Any:
        with self._lock:
            self._check_open()
            self._send(("call", name, args, kwargs))
            return self._result()

    # -- the Engine calls -----------------------------------------------------------------------
    def tokens_for(self, prompt: Any, *, chat: bool = False, system: str | None = None,
                   limit: int | None = None, tools: Any = None, parse_special: bool = False,
                   media: bool = False) -> list[int]:
        """The child's `Engine.tokens_for`, computed here from the same vocabulary and
        template: it never waits for an answer streaming through the pipe."""
        self._check_open()
        assert self._vocab is not None
        return prompt_tokens(self._vocab, prompt, chat=chat, system=system, limit=limit, tools=tools,
                             parse_special=parse_special, media=media)

    def forget_prompts(self) -> None:
        """`Engine.forget_prompts` in the child."""
        self._call("forget_prompts", (), {})

    def calibration_key(self) -> str:
        """The key the split target's pass costs persist under (the child's Engine decides)."""
        return self._call("calibration_key", (), {})

    def first_divergence(self, prompt: Sequence[int], reference: Sequence[int], other: Sequence[int]) -> Any:
        """`Engine.first_divergence` in the child, where the target's weights live (the race's check)."""
        return self._call("first_divergence", (list(prompt), list(reference), list(other)), {})

    def decoder(self, draft_model: Any = None, on_progress: Callable[[float], bool] | None = None) -> None:
        """Prepare (load once) a drafter in the child: a path, "lookup", "suffix" or None."""
        if draft_model is not None and not isinstance(draft_model, (str, os.PathLike)):
            raise TandemError("with RPC workers the draft must be a file path, 'lookup', 'suffix' or None")
        with self._lock:
            self._check_open()
            self._send(("decoder", str(draft_model) if isinstance(draft_model, os.PathLike) else draft_model))
            self._result(on_progress, timeout=self.load_timeout)

    def stream(self, prompt: Any, *, cancel: Any = None, **options: Any) -> Iterator[Event]:
        """The child's events as they come; checked here, before anything is sent."""
        from ..decoding.drafting.lookahead import LiveLookahead

        self._check_open()
        req = self.request(prompt, **options)
        live = req.lookahead if isinstance(req.lookahead, LiveLookahead) else None
        if isinstance(req.draft, os.PathLike):
            req = req.with_(draft=str(req.draft))
        elif req.draft is not None and not isinstance(req.draft, str):
            raise TandemError("with RPC workers the draft must be a file path, 'lookup', 'suffix' or None")
        if live is not None:  # the slider's handle stays here; the child follows its label
            req = req.with_(lookahead=live.label)
        return self._stream(req, cancel, live)

    def _stream(self, req: GenerationRequest, cancel: Any, live: Any) -> Iterator[Event]:
        with self.queue.hold(), self._lock:
            self._check_open()
            self._send(("stream", req))
            sent_label = [live.label] if live is not None else None

            def follow_slider() -> None:
                if live is not None and live.label != sent_label[0]:
                    sent_label[0] = live.label
                    self._send_ctrl(("lookahead", live.label))

            told = [False]

            def is_cancelled() -> bool:  # True once: the child needs to hear it only once
                if told[0] or cancel is None or not cancel.cancelled:
                    return False
                told[0] = True
                return True

            slowest: float | None = None  # the longest silence between two events after the first

            def stop_limit() -> float:
                if slowest is None:
                    return self.hang_timeout
                return min(self.hang_timeout, max(STOP_GRACE_S, STOP_STEPS * slowest))

            finished = False
            try:
                heard: float | None = None
                while True:
                    limit = stop_limit()
                    msg = self._recv(is_cancelled, follow_slider, timeout=limit if told[0] else None, stop_limit=limit,
                                     stopping=told[0])
                    now = time.monotonic()
                    if heard is not None:
                        slowest = max(slowest or 0.0, now - heard)
                    heard = now
                    if msg[0] == "event":
                        yield msg[1]
                    elif msg[0] == "end":
                        finished = True
                        return
                    elif msg[0] == "error":
                        finished = True
                        raise _unpack_error(*msg[1:])
            except (RemoteWorkerLost, TandemError):
                finished = True
                raise
            finally:
                if not finished and not self._closed:  # the caller stopped reading: stop the child too
                    self._send_ctrl(("cancel",))
                    try:
                        while self._recv(timeout=stop_limit(), stopping=True)[0] not in ("end", "error"):
                            pass
                    except TandemError:
                        pass

    # -- ending -----------------------------------------------------------------------------------
    def _kill(self) -> None:
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(5)

    def close(self) -> None:
        """Stop a running generation and end the child. Safe from any thread, more than once."""
        if self._closed:
            if self._proc.is_alive():
                self._kill()
            return
        self._closed = True
        self._send_ctrl(("cancel",))
        if self._lock.acquire(timeout=2):  # a running stream ends within a step of the cancel
            try:
                self._conn.send(("close",))
            except (OSError, ValueError):
                pass
            finally:
                self._lock.release()
            self._proc.join(10)
        self._kill()
        for c in (self._conn, self._ctrl):
            try:
                c.close()
            except OSError:
                pass
