"""The Models page's table of catalog pairs: title, tags, what Download still fetches, fit on
this machine, and what is on disk, including a download that stopped part-way ("312.0 MB of
1.1 GB (partial)"), so a cancelled or cut download is seen, resumed or freed."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor, QFont

from engine.models import partial, store
from engine.models.catalog import Catalog, PairSpec
from engine.models.hardware import Bandwidth, Hardware, pair_fit, ram_bandwidth
from engine.units import human_bytes

from ... import theme
from ...widgets.controls.table_model import RowsTableModel

Index = QModelIndex | QPersistentModelIndex


class PairsModel(RowsTableModel):
    """The catalog's pairs: title, tags, download size, fit on this machine, local state."""

    COLUMNS = ["Pair", "Tags", "Download", "Fits this machine", "On disk"]
    PAIR_ID = Qt.ItemDataRole.UserRole

    def __init__(self, catalog: Catalog, hw: Hardware, parent: Any = None, bandwidth: Bandwidth | None = None):
        super().__init__(parent)
        self.catalog = catalog
        self.rows = list(catalog.pairs.values())
        bw = bandwidth or ram_bandwidth(hw)
        self.fits = [pair_fit(p, hw, bandwidth=bw) for p in self.pairs]
        self.states: list[store.PairState | None] = [None] * len(self.pairs)
        self.partials: list[partial.PairPartial | None] = [None] * len(self.pairs)
        self.errors: list[str] = [""] * len(self.pairs)
        self.loaded_id: str | None = None
        self.dark = False
        self.refresh_states()

    @property
    def pairs(self) -> list[PairSpec]:
        return self.rows

    def refresh_states(self) -> None:
        for i, p in enumerate(self.pairs):
            try:
                self.states[i], self.partials[i], self.errors[i] = store.pair_state(p), partial.pair_partial(p), ""
            except Exception as e:  # an unreadable cache folder must not break the table
                self.states[i], self.partials[i], self.errors[i] = None, None, str(e)
        self._changed()

    def state_of(self, pair: PairSpec) -> store.PairState | None:
        return self.states[self.pairs.index(pair)]

    def partial_of(self, pair: PairSpec) -> partial.PairPartial | None:
        """The pair's partial download, when the row shows one (a ready pair shows 'ready')."""
        return self._shown_partial(self.pairs.index(pair))

    def _shown_partial(self, row: int) -> partial.PairPartial | None:
        state = self.states[row]
        return None if state is not None and state.ready else self.partials[row]

    def set_loaded(self, pair_id: str | None) -> None:
        self.loaded_id = pair_id
        self._changed()

    def set_dark(self, dark: bool) -> None:
        self.dark = dark
        self._changed()

    def to_fetch(self, row: int) -> tuple[int, str]:
        """(bytes Download still fetches, which part): a pair whose target is on disk
        downloads only its draft, and the other way round; a partial download, the rest."""
        p, state, part = self.pairs[row], self.states[row], self._shown_partial(row)
        if part is not None and part.resumable:
            return p.bytes - part.on_disk, "rest"
        if state is None or state.ready or state.word == "not downloaded":
            return p.bytes, ""
        if state.word == "target only":
            return p.draft.bytes, "draft"
        return p.target.bytes, "target"

    def word(self, row: int) -> str:
        """The On disk column's words for a row (without the '· loaded' mark)."""
        state, part = self.states[row], self._shown_partial(row)
        if part is not None:
            return part.word
        return state.word if state is not None else "unknown"

    def row_of(self, pair_id: str) -> int:
        return next((i for i, p in enumerate(self.pairs) if p.id == pair_id), -1)

    def _changed(self) -> None:
        if self.pairs:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.pairs) - 1, len(self.COLUMNS) - 1))

    def _colour(self, word: str, ready: bool = False) -> QColor | None:
        pal = theme.palette(self.dark)
        if ready or word in ("fits on GPU", "fits in RAM"):
            return QColor(pal.good)
        if word in ("partial offload", "target only", "draft only") or word.endswith(("(partial)", "cut download")):
            return QColor(pal.warn)
        if word == "does not fit":
            return QColor(pal.bad)
        return None

    def _disk_detail(self, row: int) -> str:
        """One line per model (a partial download's bytes where there is one), then what to do."""
        p, state, part = self.pairs[row], self.states[row], self._shown_partial(row)
        if state is None:
            return self.errors[row]
        if part is None:
            return state.detail(p)
        lines = [f"{role} {m.title}: {part.detail_of(m) or store.STATE_WORDS.get(word, word)}"
                 for role, m, word in (("target", p.target, state.target), ("draft", p.draft, state.draft))]
        verb = "Resume continues the download; " if part.resumable else ""
        return "\n".join(lines) + f"\n{verb}Delete… frees the {human_bytes(part.freeable)} of partial files."

    def _size_tip(self, row: int) -> str:
        p = self.pairs[row]
        sizes = f"target {human_bytes(p.target.bytes)}" + (
            f" + draft {human_bytes(p.draft.bytes)}" if p.draft.id != p.target.id else "")
        size, part = self.to_fetch(row)
        if part == "rest":
            return sizes + f"\n{human_bytes(p.bytes - size)} is on disk already: Resume fetches the rest."
        other = "target" if part == "draft" else "draft"
        return sizes + (f"\nThe {other} is on disk already: Download fetches the {part} only." if part else "")

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row, col = index.row(), index.column()
        p, fit, state = self.pairs[row], self.fits[row], self.states[row]
        word = self.word(row)
        default = p.id == self.catalog.default_pair
        if role == self.PAIR_ID:
            return p.id
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return p.title + ("  ★ default" if default else "")
            if col == 1:
                return ", ".join(p.tags + (("images",) if p.sees else ()))
            if col == 2:
                size, part = self.to_fetch(row)
                return human_bytes(size) + (f" ({part})" if part else "")
            if col == 3:
                return fit.label
            if col == 4:
                return word + ("  · loaded" if p.id == self.loaded_id else "")
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == 0:
                drafts = "drafting with its own MTP head" if p.drafter == "mtp" else f"+ {p.draft.title}"
                tip = f"{p.target.title} {drafts}, lookahead {p.lookahead}\n{p.note}"
                if p.gpu_speedup:
                    tip += f"\nPredicted speed-up on a GPU: {p.gpu_speedup} (a prediction, not measured here)"
                return tip + ("\nThe default pair." if default else "")
            if col == 2:
                return self._size_tip(row)
            if col == 3:
                return fit.detail
            if col == 4:
                return self._disk_detail(row)
        if role == Qt.ItemDataRole.FontRole and col == 0 and (default or p.id == self.loaded_id):
            f = QFont()
            f.setBold(True)
            return f
        if role == Qt.ItemDataRole.ForegroundRole and col in (3, 4):
            return self._colour(fit.verdict) if col == 3 else self._colour(word, state is not None and state.ready)
        if role == Qt.ItemDataRole.TextAlignmentRole and col == 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None
