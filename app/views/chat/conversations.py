"""The chat's conversation list: search (each found chat with a snippet of what matched), the
folder shown, pick, right-click, rename, pin, file in a folder and delete.

Pinned chats are listed first, under a "Pinned" heading (shown only while one is pinned); a
chat's folder is on its second line, before when it was last used. `ConversationList` acts
on the list's widgets (layout.py's ConversationColumn) and the history; what opening or
starting a chat does to the rest of the page is the page's, told by the `chosen` and
`deleted` signals."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QInputDialog, QListWidgetItem, QMenu, QMessageBox, QWidget

from ...history import Conversation, History, HistoryError
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
        self.folder_dialog: QInputDialog | None = None
        self.folder = column.folder
        self.search.textChanged.connect(self.refresh)
        self.folder.currentIndexChanged.connect(lambda _i: self.refresh())
        self.conv_list.currentItemChanged.connect(self._selected)
        self.conv_list.itemClicked.connect(self._clicked)
        self.conv_list.customContextMenuRequested.connect(self.show_menu)
        more = column.more_btn.menu()
        more.aboutToShow.connect(lambda: self.actions(more))  # Pin or Unpin: as the open chat is now
        self.actions(more)

    def refresh(self) -> None:
        """The chat list: pinned first, then newest first, each row its title and its folder and
        when it was last used; while searching, the chats found, best first, each with a snippet."""
        current = self._current()
        self.conv_list.blockSignals(True)
        self.conv_list.clear()
        search = self.search.text().strip()
        try:
            self._fill_folders()
            rows = self._history.find(search) if search else [(c, "") for c in self._history.conversations()]
        except HistoryError as e:
            rows = []
            self._notify(str(e))
        shown = self.folder.currentData() if self.folder.isVisibleTo(self.folder.parentWidget()) else None
        rows = [(c, snip) for c, snip in rows if shown is None or c.folder == shown]
        pinned = not search and any(c.pinned for c, _ in rows)
        for i, (c, snippet) in enumerate(rows):
            if pinned and (i == 0 or rows[i - 1][0].pinned != c.pinned):
                self._heading("Pinned" if c.pinned else "Chats")
            item = self._row(c, snippet)
            self.conv_list.addItem(item)
            if c.id == current:
                self.conv_list.setCurrentItem(item)
        if not rows and search:  # say so, rather than an empty list that looks broken
            self._heading(f"No conversation matches “{search}”", bold=False)
        self.conv_list.blockSignals(False)

    @staticmethod
    def _row(c: Conversation, snippet: str) -> QListWidgetItem:
        second = snippet or " · ".join(x for x in (c.folder, relative_date(c.updated)) if x)
        item = QListWidgetItem(f"{c.title}\n{second}")
        item.setData(Qt.ItemDataRole.UserRole, c.id)
        where = f"in the folder {c.folder}, " if c.folder else ""
        item.setToolTip(f"{c.title}\n{'pinned, ' if c.pinned else ''}{where}last used {absolute_date(c.updated)}"
                        + (f"\n\n{snippet}" if snippet else ""))
        return item

    def _heading(self, text: str, bold: bool = True) -> None:
        """A line in the list that is not a chat (nothing to open)."""
        item = QListWidgetItem(text)
        # a heading is drawn in the text's colour (enabled) but cannot be selected; a note is greyed
        item.setFlags(Qt.ItemFlag.ItemIsEnabled if bold else Qt.ItemFlag.NoItemFlags)
        if bold:
            font = QFont(self.conv_list.font())
            font.setBold(True)
            item.setFont(font)
        self.conv_list.addItem(item)

    def _fill_folders(self) -> None:
        """The folder box: All chats, each folder, Not in a folder; hidden while there is none.
        The folder shown stays shown while it has chats."""
        folders = self._history.folders()
        shown = self.folder.currentData()
        self.folder.blockSignals(True)
        self.folder.clear()
        self.folder.addItem("All chats", None)
        for name in folders:
            self.folder.addItem(f"Folder: {name}", name)
        self.folder.addItem("Not in a folder", "")
        at = self.folder.findData(shown) if shown is not None else 0
        self.folder.setCurrentIndex(max(at, 0))
        self.folder.setVisible(bool(folders))
        self.folder.blockSignals(False)

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
        """Rename, Pin, Move to folder, Export and Delete of the open chat, for the context
        menu and the More button."""
        menu.clear()
        conv = self._history.get(self._current()) if self._current() is not None else None
        menu.addAction("Rename…", self.rename)
        menu.addAction("Unpin" if conv is not None and conv.pinned else "Pin to top", self.toggle_pin)
        menu.addAction("Move to folder…", self.move_to_folder)
        menu.addAction("Export (Markdown, Word, PDF, HTML, JSON)…", lambda: self._export())
        menu.addSeparator()
        menu.addAction("Delete…", self.delete)
        for action in menu.actions():
            action.setEnabled(conv is not None)
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

    def toggle_pin(self) -> None:
        conv = self._history.get(self._current()) if self._current() is not None else None
        if conv is None:
            return
        try:
            self._history.set_pinned(conv.id, not conv.pinned)
        except HistoryError:  # the window has said so
            return
        self._notify(f"“{conv.title}” " + ("unpinned" if conv.pinned else "pinned to the top of the list"))
        self.refresh()

    def move_to_folder(self) -> None:
        """File the open chat in a folder: one of those there are, or a new name; empty: none."""
        conv = self._history.get(self._current()) if self._current() is not None else None
        if conv is None:
            return
        self.folder_dialog = dialog = folder_dialog(self._page, conv.folder, self._history.folders())
        if not dialog.exec():
            return
        try:
            self._history.set_folder(conv.id, dialog.textValue())
        except HistoryError:
            return
        name = " ".join(dialog.textValue().split())
        self._notify(f"“{conv.title}” moved to the folder {name}" if name else f"“{conv.title}” is in no folder now")
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


def folder_dialog(parent: QWidget, folder: str, folders: list[str]) -> QInputDialog:
    """Choose a folder among those there are or type a new one; empty: in no folder."""
    d = QInputDialog(parent)
    d.setWindowTitle("Move to folder")
    d.setLabelText("Folder (a new name makes a new folder; empty: none)")
    d.setComboBoxEditable(True)
    d.setComboBoxItems(["", *folders])
    d.setTextValue(folder)
    d.resize(max(RENAME_MIN_WIDTH, d.sizeHint().width()), d.sizeHint().height())
    return d


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
