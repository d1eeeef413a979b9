"""Delete… for a pair whose download stopped part-way: it frees the unfinished files only
(complete files stay), after a confirmation naming the size, and not while that download runs.
A failure (a file vanished, permission denied) is one line on the page; nothing else changes."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtWidgets import QLabel, QWidget

from engine.errors import StoreError
from engine.models import partial, store
from engine.models.catalog import PairSpec
from engine.units import human_bytes

from ...downloads.controller import DownloadController
from .files import confirm


def downloading_models(downloads: DownloadController) -> set[str]:
    """The ids of the models the running download fetches (none when no download runs)."""
    st = downloads.status
    return {m.id for m in st.pair.models} if downloads.active and st is not None else set()


def delete_partial_download(parent: QWidget, downloads: DownloadController, pair: PairSpec, line: QLabel,
                            say: Callable[[str], Any]) -> bool:
    """Ask, then remove the pair's partial download files; report on `line` (and `say`).
    True when files were deleted."""
    busy = downloading_models(downloads) & {m.id for m in pair.models}
    if busy:
        return _tell(line, say, f"{pair.title} is downloading: cancel it before deleting its partial download")
    try:
        found = partial.pair_partial(pair)  # read again: the files may have changed since the table was drawn
    except OSError as e:
        return _tell(line, say, f"Could not read the partial download of {pair.title}: {e.strerror or e}")
    if found is None:
        return _tell(line, say, f"Nothing of a partial download of {pair.title} is on disk any more")
    names = " and ".join(f"{pm.model.title} ({human_bytes(pm.freeable)})" for pm in found.models)
    text = (f"Delete the partial download of {names}?\n\nThis frees {human_bytes(found.freeable)}. Only the "
            f"unfinished files are removed from {store.hub_cache()}; complete files stay. "
            "Download starts those files over.")
    if not confirm(parent, "Delete partial download", text):
        return False
    freed = 0
    try:
        for pm in found.models:
            freed += partial.delete_partial(pm.model)
    except StoreError as e:
        _tell(line, say, f"Could not delete all of the partial download of {pair.title}: {e}")
        return freed > 0
    _tell(line, say, f"Deleted the partial download of {pair.title}: {human_bytes(freed)} freed")
    return True


def _tell(line: QLabel, say: Callable[[str], Any], text: str) -> bool:
    line.setText(text)
    say(text)
    return False
