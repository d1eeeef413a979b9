"""A generation's turn in the parallel slots: the server's requests and the app's chat (its plain
answers and each model turn of its tool loop) take it the same way (a side-by-side job in the
engine's queue, the prompt read as `Engine.stream` reads it, the slot's events handed to the
queue's listeners too: `run_turn`, and `take_turn` for a caller without a job yet), and which of
the slots' drafts a request's draft choice is."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Sequence

from ..cancel import CancelToken
from ..drafting.choice import DraftChoice, DraftKind
from ..events import Event
from ..queue import Job
from ..request import GenerationRequest


def slot_draft(spec: Any, drafts: Sequence[str], model_draft: Any = None) -> str | None:
    """The name in `drafts` (what the slots run) of the draft `spec` asks for, or None when the
    slots do not run it. A draft file is their "model" only when it is `model_draft`, the file
    they were built with (each slot's draft context is on that one model)."""
    if isinstance(spec, str) and spec in drafts:
        return spec
    choice = DraftChoice.parse(spec)
    if choice.kind in (DraftKind.PATH, DraftKind.MODEL):
        mine = DraftChoice.parse(model_draft).path if model_draft is not None else None
        same = mine is not None and choice.path is not None and _same_file(choice.path, mine)
        name = "model" if same else None
    elif choice.kind is DraftKind.DRAFTER:
        name = None  # a caller's own drafter drafts for one decoder, not for a slot's
    else:
        name = choice.kind.value
    return name if name in drafts else None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def stream_in_slot(engine: Any, slots: Any, request: GenerationRequest, job: Job, draft: str) -> Iterator[Event]:
    """`request` in a free slot of `slots` (a `SlotScheduler` over `engine`'s target) with the
    draft named `draft`, once `job` (submitted `side_by_side`) has its turn beside the others;
    its prompt's tokens and pictures as `Engine.stream` reads them (each picture encoded once)."""
    queue = engine.queue
    with queue.turn(job):
        tokens, images = engine.prompt_input(request)
        for ev in slots.stream(tokens, request, job.cancel, draft=draft, images=images):
            queue.notify(job, ev)
            yield ev


def take_turn(engine: Any, request: GenerationRequest, cancel: CancelToken | None = None, *, source: str = "chat",
              slots: Any = None, draft: str | None = None) -> Iterator[Event]:
    """`request`'s events once it has its turn: in a slot of `slots` beside the others when the
    slots run its draft (`draft`, from `slot_draft`), otherwise through the engine's queue, one at
    a time. The place in line is taken when the iteration begins and given back when it ends or
    is closed, so a caller that generates several times (the tool loop's turns) holds nothing in
    between (not while a call waits for the user's approval). Raises `Cancelled` when `cancel`
    fires before the turn comes."""
    in_slot = slots is not None and draft is not None
    job = engine.queue.submit(source, bounded=False, cancel=cancel, side_by_side=in_slot)
    yield from run_turn(engine, request, job, slots=slots, draft=draft)


def run_turn(engine: Any, request: GenerationRequest, job: Job, *, slots: Any = None,
             draft: str | None = None) -> Iterator[Event]:
    """`request`'s events in `job`'s turn (a job already in the engine's queue: the server's,
    admitted before its prompt was counted): in a slot of `slots` with the draft named `draft`
    when both are given (`job` submitted `side_by_side`), else through the queue, alone."""
    if slots is not None and draft is not None:
        return stream_in_slot(engine, slots, request, job, draft)
    return engine.queue.stream(engine, request, job)
