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
from typing import Any, AsyncIterator

from ...errors import Cancelled, TandemError
from ...decoding.rpc_backend import RpcError
from ...decoding.events import DoneEvent, PrefillEvent, TokenEvent
from ...decoding.queue import GenerationQueue, Job

log = logging.getLogger("tandem.server")
_END = object()


class GenerationFailed(Exception):
    """The generation raised; `user` tells whether the input was to blame (a TandemError);
    `lost_worker`: an RPC worker of a split target was lost (the server cannot answer now)."""

    def __init__(self, message: str, user: bool, lost_worker: bool = False):
        super().__init__(message)
        self.user, self.lost_worker = user, lost_worker


class Generation:
    """One queued generation whose `TokenEvent`s and final `DoneEvent` arrive by `async for`."""

    def __init__(self, queue: GenerationQueue, job: Job, engine: Any, prompt: Any, **kw: Any):
        self.queue, self.job, self.engine, self.prompt, self.kw = queue, job, engine, prompt, kw
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.prompt_evaluated = 0

    def start(self) -> "Generation":
        self.queue.run_on_worker(self._work)
        return self

    def cancel(self) -> None:
        self.job.cancel.cancel()

    def _put(self, item: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server stopped, nobody listens
            self.cancel()

    def _work(self) -> None:
        first_prefill = True
        try:
            for ev in self.queue.stream(self.engine, self.prompt, self.job, **self.kw):
                if isinstance(ev, TokenEvent) or isinstance(ev, DoneEvent):
                    self._put(ev)
                elif isinstance(ev, PrefillEvent) and first_prefill:
                    first_prefill = False
                    self.prompt_evaluated = ev.total + 1  # the last prompt token is fed with the first step
        except Cancelled:
            pass
        except RpcError as e:  # a split target's worker died or hung: not the request's fault
            self._put(GenerationFailed(str(e), user=False, lost_worker=True))
        except TandemError as e:
            self._put(GenerationFailed(str(e), user=True))
        except Exception as e:  # a bug: reported as a 500, the server lives on
            log.exception("generation failed")
            self._put(GenerationFailed(f"{type(e).__name__}: {e}", user=False))
        finally:
            self._put(_END)

    async def __aiter__(self) -> AsyncIterator[TokenEvent | DoneEvent]:
        while True:
            item = await self.events.get()
            if item is _END:
                return
            if isinstance(item, GenerationFailed):
                raise item
            yield item
