"""The child process of a `RemoteEngine`: it loads `Engine(target, rpc=...)` and answers the
parent's requests over a pipe (a lost RPC worker can only end this process, never the app).

Messages in: ("stream", GenerationRequest), ("decoder", draft), ("call", name, args, kwargs)
(an Engine method; the vocabulary is read in the parent), ("close",); on the control pipe: ("cancel",), ("lookahead", label).
Messages out: ("ready", info), ("progress", what, x), ("event", Event), ("end",),
("result", value), ("error", module, class, message), ("fatal", message).
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import Any, Callable

from ..llamacpp import rpc_backend as rpc
from ..decoding.engine import Engine
from ..decoding.request import GenerationRequest
from ..errors import Cancelled, TandemError

_POLL_S = 0.05


# -- errors across the pipe ---------------------------------------------------------------------
def _pack_error(e: BaseException) -> tuple[str, str, str]:
    return (type(e).__module__, type(e).__qualname__, str(e))


def _unpack_error(module: str, name: str, message: str) -> BaseException:
    """The child's error as the same class when it is one of ours, else a TandemError."""
    try:
        cls = getattr(importlib.import_module(module), name) if module.startswith("engine") else None
        if isinstance(cls, type) and issubclass(cls, TandemError):
            return cls(message)
    except Exception:  # noqa: BLE001 - an odd constructor: fall back to the message
        pass
    if name == "MemoryError":
        return MemoryError(message)
    return TandemError(f"{name}: {message}" if name not in ("TandemError",) else message)


# -- the child ----------------------------------------------------------------------------------
def _child_main(conn: Any, ctrl: Any, spec: dict) -> None:
    """Load the split target, then answer requests until told to close (or the pipe ends)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's: it cancels, then closes us

    send_lock = threading.Lock()

    def send(msg: tuple) -> None:
        with send_lock:
            conn.send(msg)

    def fatal(message: str) -> None:  # llama.cpp is about to abort: say why, then end quietly
        try:
            send(("fatal", message))
        finally:
            os._exit(3)

    cancel_load = threading.Event()

    def progress(x: float) -> bool:
        send(("progress", "target", float(x)))
        while ctrl.poll():
            if ctrl.recv()[0] == "cancel":
                cancel_load.set()
        return not cancel_load.is_set()

    try:
        cluster = rpc.connect(spec["endpoints"], timeout=spec["connect_timeout"], weights=spec["weights"], fatal_hook=fatal)
        eng = Engine(spec["target"], rpc=cluster, runtime=spec["runtime"], metrics_log=spec["metrics_log"],
                     calibration=spec["calibration"], on_progress=progress, history_draft=spec.get("history_draft", True))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        send(("error", *_pack_error(e)))
        return
    if cancel_load.is_set():
        eng.close()
        send(("error", *_pack_error(Cancelled("loading cancelled"))))
        return
    t = eng.target
    n_layer = int(t.header.get(f"{t.header.architecture}.block_count") or 0)
    send(("ready", {"name": t.name, "architecture": t.architecture, "chat_template": t.chat_template,
                    "n_vocab": t.n_vocab, "n_gpu_layers": t.n_gpu_layers,
                    "shares": cluster.placement(n_layer).shares if n_layer else []}))
    try:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break
            op = msg[0]
            if op == "close":
                break
            try:
                if op == "stream":
                    _child_stream(eng, msg[1], send, ctrl)
                elif op == "decoder":
                    eng.decoder(msg[1], on_progress=lambda x: (send(("progress", "draft", float(x))), True)[1])
                    send(("result", None))
                elif op == "call":
                    _, name, args, kwargs = msg
                    send(("result", getattr(eng, name)(*args, **kwargs)))
                else:
                    send(("error", *_pack_error(TandemError(f"unknown request {op!r}"))))
            except BaseException as e:  # noqa: BLE001 - every failure goes back as one message
                send(("error", *_pack_error(e)))
    finally:
        eng.close()


def _child_stream(eng: Any, req: GenerationRequest, send: Callable[[tuple], None], ctrl: Any) -> None:
    """Run one generation; a watcher applies the parent's cancel and lookahead changes."""
    from ..decoding.cancel import CancelToken

    while ctrl.poll():  # leftovers of an earlier generation
        ctrl.recv()
    token = CancelToken()
    live = req.live_lookahead()
    req = req.with_(lookahead=live)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if ctrl.poll(_POLL_S):
                what, *rest = ctrl.recv()
                if what == "cancel":
                    token.cancel()
                elif what == "lookahead":
                    live.set(rest[0])

    watcher = threading.Thread(target=watch, name="rpc-child-control", daemon=True)
    watcher.start()
    try:
        for ev in eng.stream(req, cancel=token):
            send(("event", ev))
        send(("end",))
    finally:
        done.set()
        watcher.join()
