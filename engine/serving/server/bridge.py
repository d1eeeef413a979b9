"""Runs one request's generation on the engine's generation thread and hands its events to the event loop.

llama.cpp blocks while it computes, so generations never run on the asyncio loop. The
worker waits for its turn in the engine's `GenerationQueue`, then streams; each token
crosses to the loop with one `call_soon_threadsafe`. Cancelling (client gone, server
stopping) sets the job's `CancelToken`: the decoder stops at its next step, or the job
leaves the line if it had not started.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, AsyncIterator, Callable

from ...errors import Cancelled, NonFiniteLogits, TandemError
from ...llamacpp.rpc_backend import RpcError
from ...decoding.events import DoneEvent, PrefillEvent, RunStats, TokenEvent
from ...decoding.queue import GenerationQueue, Job
from ...decoding.request import GenerationRequest
from ...decoding.drafting.choice import DraftChoice
from ...decoding.slots.turn import run_turn
from .redact import server_side

log = logging.getLogger("tandem.server")
_END = object()


class GenerationFailed(Exception):
    """The generation raised; `user` tells whether the input was to blame (a TandemError that
    is not `redact.server_side`);
    `lost_worker`: an RPC worker of a split target was lost (the server cannot answer now)."""

    def __init__(self, message: str, user: bool, lost_worker: bool = False):
        super().__init__(message)
        self.user, self.lost_worker = user, lost_worker


class Generation:
    """One queued generation whose events arrive by `async for`: the `PrefillEvent` that completes
    the prompt, its `TokenEvent`s and the final `DoneEvent`.

    `observe(stats)` and `cancelled()` are called on the worker thread when the generation ends,
    whether or not anyone still listens (a stream whose client left still counts)."""

    def __init__(self, queue: GenerationQueue, job: Job, engine: Any, request: GenerationRequest, *,
                 observe: Callable[[RunStats], None] = lambda s: None, cancelled: Callable[[], None] = lambda: None,
                 slots: Any = None):
        """`slots`: the server's parallel slots (a `SlotScheduler`; None: the engine's decoder)."""
        self.queue, self.job, self.engine, self.request, self.slots = queue, job, engine, request, slots
        self.observe, self.cancelled = observe, cancelled
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.prompt_evaluated = 0

    def start(self) -> "Generation":
        if self.slots is None:
            self.queue.run_on_worker(self._work)
        else:  # this thread only waits for the slot's events: the slots decode on their own thread
            threading.Thread(target=self._work, name="tandem-slot-answer", daemon=True).start()
        return self

    def cancel(self) -> None:
        self.job.cancel.cancel()

    def _put(self, item: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server stopped, nobody listens
            self.cancel()

    def _work(self) -> None:
        first_prefill, prompt_done = True, False
        try:
            events = run_turn(self.engine, self.request, self.job, slots=self.slots, draft=self._slot_draft())
            for ev in events:
                if isinstance(ev, DoneEvent):
                    self.observe(ev.stats)
                    self._put(ev)
                elif isinstance(ev, TokenEvent):
                    self._put(ev)
                elif isinstance(ev, PrefillEvent):
                    if first_prefill:
                        first_prefill = False
                        self.prompt_evaluated = ev.total + 1  # the last prompt token is fed with the first step
                    if ev.done >= ev.total and not prompt_done:
                        prompt_done = True
                        self._put(ev)  # the prompt is read: a stream may send its first chunk now
        except Cancelled:  # cancelled before its turn (the engine never started it)
            self.cancelled()
        except RpcError as e:  # a split target's worker died or hung: not the request's fault
            self._put(GenerationFailed(str(e), user=False, lost_worker=True))
        except NonFiniteLogits as e:  # the model file is broken, not the request: a 5xx, one log line
            log.error("%s", e)
            self._put(GenerationFailed(str(e), user=False))
        except TandemError as e:  # the request's fault, unless the model or its context failed (redact.py)
            self._put(GenerationFailed(str(e), user=not server_side(e)))
        except Exception as e:  # a bug: reported as a 500, the server lives on
            log.exception("generation failed")
            self._put(GenerationFailed(f"{type(e).__name__}: {e}", user=False))
        finally:
            self._put(_END)

    def _slot_draft(self) -> str | None:
        """The slots' name of the draft the request's check chose ("model": the served draft
        model's slot drafter); None without slots (the request takes the queue's turn)."""
        if self.slots is None:
            return None
        req = self.request
        return req.draft if isinstance(req.draft, str) and req.draft in self.slots.drafts \
            else DraftChoice.parse(req.draft).kind.value

    async def __aiter__(self) -> AsyncIterator[PrefillEvent | TokenEvent | DoneEvent]:
        while True:
            item = await self.events.get()
            if item is _END:
                return
            if isinstance(item, GenerationFailed):
                raise item
            yield item
