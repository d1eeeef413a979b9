"""The model a chat's answers were written with, kept with the chat's settings
(app/history/settings.py), so that a relaunch opens the last chat on its own model rather than
on the default pair; when that model is no longer on this computer, one line says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.models import store

KEYWORD_DRAFTS = ("lookup", "mtp", "suffix")  # drafters that are not a file


def model_record(pair: Any, n_ctx: int) -> dict[str, Any] | None:
    """What reloads `pair` (a session.LoadedPair): its files, draft, label, catalog id and context."""
    if pair is None:
        return None
    draft = pair.draft
    return {"target": str(pair.target), "draft": str(draft) if isinstance(draft, Path) else draft,
            "label": pair.label, "pair_id": pair.pair_id, "n_ctx": int(n_ctx)}


def load_chat_model(session: Any, catalog: Any, record: Any) -> str:
    """Start loading the chat's model (a `model_record`): "" when it is loading, else the one
    line why not (deleted, not downloaded, a record this version cannot read)."""
    if not isinstance(record, dict) or not isinstance(record.get("target"), str):
        return "This chat's model was not recorded in a form this version reads"
    target = Path(record["target"])
    label = str(record.get("label") or target.name)
    n_ctx = record.get("n_ctx") if isinstance(record.get("n_ctx"), int) else None
    pair_id = record.get("pair_id")
    pairs = getattr(catalog, "pairs", {})
    if pair_id and pair_id in pairs:
        pair = catalog.pair(pair_id)
        if any(store.find_model(m.id, catalog) is None for m in (pair.target, pair.draft)):
            return f"This chat was written with {label}, which is not downloaded any more"
        return "" if session.load_pair(pair, n_ctx=n_ctx) else f"{label} could not be loaded"
    if not target.is_file():
        return f"This chat was written with {label}, whose file {target} is gone"
    draft = record.get("draft")
    if isinstance(draft, str) and draft not in KEYWORD_DRAFTS:
        if not Path(draft).is_file():
            return f"This chat was written with {label}, whose draft {draft} is gone"
        draft = Path(draft)
    elif draft is not None and draft not in KEYWORD_DRAFTS:
        draft = None
    session.load(target, draft, label=label, pair_id=pair_id if isinstance(pair_id, str) else None, n_ctx=n_ctx)
    return ""


__all__ = ["model_record", "load_chat_model"]
