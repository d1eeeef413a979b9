"""Loading a pair whose target is split over llama.cpp RPC workers (issue 14).

The target then lives in a child process (engine/serving/remote_engine.py): a worker lost or hung
mid-answer ends that child, never the app. The loader is `workers.LoadWorker` with the
engine swapped; the session wires `on_lost` so it can drop the dead engine and offer to
reload the pair on this machine alone.
"""

from __future__ import annotations

from typing import Any, Callable

from engine.llamacpp.runtime import RuntimeParams

from .workers import LoadWorker


class RemoteLoadWorker(LoadWorker):
    """Load `target` split over `endpoints` (draft local) off the GUI thread, with progress."""

    def __init__(self, target: str, draft: Any, endpoints: list[str], runtime: RuntimeParams, *,
                 on_lost: Callable[[Exception], None] | None = None, hang_timeout: float | None = None):
        super().__init__(target, draft, runtime)
        self.endpoints, self.on_lost, self.hang_timeout = list(endpoints), on_lost, hang_timeout

    def open_engine(self, on_progress: Callable[[float], bool]) -> Any:
        from engine.serving.remote_engine import DEFAULT_HANG_TIMEOUT_S, RemoteEngine

        self.progress.emit(f"target on {len(self.endpoints)} worker(s)", 0.0)
        return RemoteEngine(self.target, rpc=self.endpoints, runtime=self.runtime, on_progress=on_progress,
                            hang_timeout=self.hang_timeout or DEFAULT_HANG_TIMEOUT_S, on_lost=self.on_lost)
