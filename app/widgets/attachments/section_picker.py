"""A document larger than the context: choose the pages (sheets, slides, chapters, sections)
to attach instead of being refused. Each row is checkable and says its tokens; the total and
the context are shown, and Attach is enabled only while the choice fits."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout

from engine.documents import Document


class SectionPicker(QDialog):
    def __init__(self, doc: Document, counts: list[int], budget: int, parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"Attach part of {doc.name}")
        self.counts, self.budget = list(counts), budget
        units = doc.unit + "s"
        total = sum(counts)
        intro = QLabel(f"{doc.name} is about {total:,} tokens; the context holds {budget:,}. "
                       f"Choose the {units} to attach:")
        intro.setWordWrap(True)
        self.list = QListWidget()
        used = 0
        for i, (s, n) in enumerate(zip(doc.sections, counts)):
            item = QListWidgetItem(f"{s.title} · {n:,} tokens")
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            fits = used + n < budget
            item.setCheckState(Qt.CheckState.Checked if fits else Qt.CheckState.Unchecked)
            used += n if fits else 0
            item.setData(Qt.ItemDataRole.UserRole, i)
            self.list.addItem(item)
        self.total = QLabel()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.attach_btn: QPushButton = self.buttons.addButton("Attach", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addWidget(self.list, 1)
        lay.addWidget(self.total)
        lay.addWidget(self.buttons)
        self.list.itemChanged.connect(lambda _item: self._update())
        self._update()

    def chosen(self) -> list[int]:
        """Indices of the checked sections, in document order."""
        return [self.list.item(r).data(Qt.ItemDataRole.UserRole) for r in range(self.list.count())
                if self.list.item(r).checkState() == Qt.CheckState.Checked]

    def set_checked(self, indices: list[int]) -> None:
        for r in range(self.list.count()):
            self.list.item(r).setCheckState(Qt.CheckState.Checked if r in indices else Qt.CheckState.Unchecked)

    def _update(self) -> None:
        chosen = self.chosen()
        used = sum(self.counts[i] for i in chosen)
        fits = bool(chosen) and used < self.budget
        self.total.setText(f"Chosen: {used:,} of {self.budget:,} tokens"
                           + ("" if fits or not chosen else " — too many for the context"))
        self.attach_btn.setEnabled(fits)
