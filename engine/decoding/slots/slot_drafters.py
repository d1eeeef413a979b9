"""Each slot's drafters, made before the slots' decoders: a plain model draft moved onto its slot's
sequence of one draft context per name (`DraftBatch`), an MTP head onto one head context with a
sequence per slot (`HeadBatch`); and their closing. The scheduler's set-up, kept apart from its steps.

May import: engine.decoding.drafting, engine.llamacpp (the shared context)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ...llamacpp.sequences import SharedContext
from ..drafting.batched_drafter import DraftBatch
from ..drafting.drafter_api import Drafter
from ..drafting.mtp_drafter import HeadBatch

__all__ = ["close_batches", "close_drafters", "make_drafters", "share_heads"]


def make_drafters(drafters: Mapping[str, Callable[[], Drafter | None]], n_slots: int,
                  batches_by_context: dict[Any, DraftBatch | HeadBatch]) -> list[dict[str, Drafter | None]]:
    """Each slot's drafter of each name (an MTP head, the target's own or Gemma 4's assistant,
    binds to its slot's sequence when its decoder is made). A plain model draft moves onto its
    slot's sequence of one `DraftBatch` per name, as it is made (its own context closed at once:
    one is held at a time beside the batch's), each batch added to `batches_by_context`."""
    made: list[dict[str, Drafter | None]] = []
    batches: dict[str, DraftBatch] = {}
    try:
        for seq in range(n_slots):
            mine: dict[str, Drafter | None] = {}
            made.append(mine)
            for name, make in drafters.items():
                d = mine[name] = make()
                if seq == 0 and (batch := DraftBatch.like(d, n_slots)) is not None:
                    batches[name] = batches_by_context[batch.shared] = batch
                if name in batches:
                    mine[name] = batches[name].adopt(d, seq)
    except BaseException:
        close_drafters(made)
        close_batches(batches_by_context)
        raise
    return made


def share_heads(made: list[dict[str, Drafter | None]], shared: SharedContext,
                batches_by_context: dict[Any, DraftBatch | HeadBatch]) -> None:
    """Per draft name whose drafter is an MTP head, one head context with a sequence per slot
    (`HeadBatch`), made over the shared target before anything is decoded (an assistant's
    must be) and before the slots' decoders bind their heads to it."""
    for name, first in made[0].items():
        batch = HeadBatch.like(first, shared.view(0), len(made))
        if batch is None:
            continue
        batches_by_context[batch.heads] = batch
        for mine in made:
            batch.adopt(mine[name])


def close_batches(batches_by_context: Mapping[Any, DraftBatch | HeadBatch]) -> None:
    for batch in batches_by_context.values():
        batch.close()


def close_drafters(made: list[dict[str, Drafter | None]]) -> None:
    for mine in made:
        for d in mine.values():
            if d is not None:
                d.close()
