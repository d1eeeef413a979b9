"""The chat's conversation list: search, pick, right-click, rename and delete.

`ConversationList` acts on the list's widgets (layout.py's ConversationColumn) and the
history; what opening or starting a chat does to the rest of the page is the page's, told
by the `chosen` and `deleted` signals."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QInputDialog, QListWidgetItem, QMenu, QMessageBox, QWidget

from ...history import History, HistoryError
from ...relative_time import absolute_date, relative_date
from .layout import ConversationColumn


class ConversationList(QObject):
    """The list of chats, newest first, and what its rows and menus do.

    `current` is the open conversation (the page's), `busy` whether an answer is being
    written (no switching or deleting then), `export` exports the open chat, `notify` says a
    line in the status bar."""

    chosen = Signal(int)  # a conversation picked in the list: the page opens it
    deleted = Signal(int)  # the open conversation was deleted: the page starts a new chat

    def __init__(self, history: History, column: ConversationColumn, page: QWidget, *,
                 current: Callable[[], int | None], busy: Callable[[], bool], export: Callable[[], None],
                 notify: Callable[[str], None]) -> None:
        super().__init__(page)
        self._history, self._page, self._current, self._busy, self._export, self._notify = (
            history, page, current, busy, export, notify)
        self.search, self.conv_list = column.search, column.conv_list
        self.context_menu: QMenu | None = None  # the last right-click menu (tests trigger its actions)
        self.rename_dialog: QInputDialog | None = None
        self.search.textChanged.connect(self.refresh)
        self.conv_list.currentItemChanged.connect(self._selected)
        self.conv_list.itemClicked.connect(self._clicked)
        self.conv_list.customContextMenuRequested.connect(self.show_menu)
        self.actions(column.more_btn.menu())

    def refresh(self) -> None:
        """The chat list, newest first: each row its title and when it was last used."""
        current = self._current()
        self.conv_list.blockSignals(True)
        self.conv_list.clear()
        try:
            convs = self._history.conversations(self.search.text())
        except HistoryError as e:
            convs = []
            self._notify(str(e))
        for c in convs:
            item = QListWidgetItem(f"{c.title}\n{relative_date(c.updated)}")
            item.setData(Qt.ItemDataRole.UserRole, c.id)
            item.setToolTip(f"{c.title}\nlast used {absolute_date(c.updated)}")
            self.conv_list.addItem(item)
            if c.id == current:
                self.conv_list.setCurrentItem(item)
        if not convs and self.search.text().strip():  # say so, rather than an empty list that looks broken
            note = QListWidgetItem(f"No conversation matches “{self.search.text().strip()}”")
            note.setFlags(Qt.ItemFlag.NoItemFlags)
            self.conv_list.addItem(note)
        self.conv_list.blockSignals(False)

    def clear_selection(self) -> None:
        """No row current (a new chat), so a click on the previous chat is a change again."""
        self.conv_list.blockSignals(True)
        self.conv_list.setCurrentRow(-1)
        self.conv_list.blockSignals(False)

    def _selected(self, item: QListWidgetItem | None, _prev: Any = None) -> None:
        if item is None or item.data(Qt.ItemDataRole.UserRole) is None:  # none, or the "no match" line
            return
        if self._busy():
            self._notify("Stop the running answer before switching conversations")
            return
        self.chosen.emit(int(item.data(Qt.ItemDataRole.UserRole)))

    def _clicked(self, item: QListWidgetItem) -> None:
        """A click on the row that is already current (currentItemChanged stays silent)."""
        if item.data(Qt.ItemDataRole.UserRole) is not None and \
                int(item.data(Qt.ItemDataRole.UserRole)) != self._current():
            self._selected(item)

    def actions(self, menu: QMenu) -> QMenu:
        """Rename, Delete and Export of the open chat, for the context menu and the More button."""
        menu.addAction("Rename…", self.rename)
        menu.addAction("Export (Markdown, Word, PDF, HTML)…", lambda: self._export())
        menu.addSeparator()
        menu.addAction("Delete…", self.delete)
        return menu

    def show_menu(self, pos: Any) -> None:
        """The right-click menu of a row: the row is opened first, then acted on."""
        item = self.conv_list.itemAt(pos)
        if item is None or item.data(Qt.ItemDataRole.UserRole) is None:
            return
        if int(item.data(Qt.ItemDataRole.UserRole)) != self._current():
            self._selected(item)
            if int(item.data(Qt.ItemDataRole.UserRole)) != self._current():
                return  # not opened (an answer is streaming): act on nothing
            self.conv_list.setCurrentItem(item)
        self.context_menu = self.actions(QMenu(self._page))
        self.context_menu.popup(self.conv_list.viewport().mapToGlobal(pos))

    def rename(self) -> None:
        cid = self._current()
        if cid is None:
            return
        conv = self._history.get(cid)
        self.rename_dialog = dialog = rename_dialog(self._page, conv.title if conv else "")
        if dialog.exec() and dialog.textValue().strip():
            self._history.rename(cid, dialog.textValue())
            self.refresh()

    def delete(self) -> None:
        cid = self._current()
        if cid is None or self._busy():
            return
        conv = self._history.get(cid)
        if QMessageBox.question(self._page, "Delete conversation",
                                f"Delete “{conv.title if conv else ''}”?") != QMessageBox.StandardButton.Yes:
            return
        self._history.delete(cid)
        self.deleted.emit(cid)
        self.refresh()


RENAME_MIN_WIDTH = 420  # px: a title of a few words shows whole in the field


def rename_dialog(parent: QWidget, title: str) -> QInputDialog:
    """The rename dialog, wide enough for the whole title (up to the window's width) instead
    of QInputDialog's narrow default field."""
    d = QInputDialog(parent)
    d.setWindowTitle("Rename conversation")
    d.setLabelText("Title")
    d.setTextValue(title)
    fm = d.fontMetrics()
    room = int(parent.window().width() * 0.9) if parent.window() is not None else 800
    d.resize(max(RENAME_MIN_WIDTH, min(room, fm.horizontalAdvance(title) + 80)), d.sizeHint().height())
    return d
