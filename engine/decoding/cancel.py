"""A cancel flag shared by whoever asked for a generation and whoever runs it.

Setting it also aborts a llama_decode in progress on every context it watches, so a long
prefill stops within one chunk instead of running to its end.
"""

from __future__ import annotations

import threading

from ..llamacpp.context import Context


class CancelToken:
    """Thread-safe cancel flag; also interrupts a running prefill decode."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._contexts: list[Context] = []

    def cancel(self) -> None:
        self._event.set()
        for c in list(self._contexts):
            c.abort()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def watch(self, ctx: Context) -> None:
        if ctx not in self._contexts:
            self._contexts.append(ctx)
