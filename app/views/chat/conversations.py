"""The chat's conversation list: search, open, rename, delete, and starting a new chat."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QInputDialog, QListWidgetItem, QMenu, QMessageBox, QWidget

from ...history import HistoryError
from ...history.settings import chat_settings
from ...relative_time import absolute_date, relative_date
from .format import last_answer_stats


class ConversationsMixin:
    """ChatView's conversation list behaviour (the list itself is built in layout.py)."""

    def refresh_conversations(self) -> None:
        """The chat list, newest first: each row its title and when it was last used."""
        current = self.conversation_id
        self.conv_list.blockSignals(True)
        self.conv_list.clear()
        try:
            convs = self.history.conversations(self.search.text())
        except HistoryError as e:
            convs = []
            self.message.emit(str(e))
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

    def _conversation_selected(self, item: QListWidgetItem | None, _prev: Any = None) -> None:
        if item is None or item.data(Qt.ItemDataRole.UserRole) is None:  # none, or the "no match" line
            return
        if self.worker is not None:
            self.message.emit("Stop the running answer before switching conversations")
            return
        self.charts.reset()  # step data is not stored: the charts show only a live answer
        self.open_conversation(int(item.data(Qt.ItemDataRole.UserRole)))
        self._close_floating_chats()

    def _conversation_clicked(self, item: QListWidgetItem) -> None:
        """A click on the row that is already current (currentItemChanged stays silent)."""
        if item.data(Qt.ItemDataRole.UserRole) is not None and \
                int(item.data(Qt.ItemDataRole.UserRole)) != self.conversation_id:
            self._conversation_selected(item)

    def _conversation_actions(self, menu: QMenu) -> QMenu:
        """Rename, Delete and Export of the open chat, for the context menu and the More button."""
        menu.addAction("Rename…", self.rename_conversation)
        menu.addAction("Export (Markdown, Word, PDF, HTML)…", lambda: self.export_conversation())
        menu.addSeparator()
        menu.addAction("Delete…", self.delete_conversation)
        return menu

    def _conversation_menu(self, pos: Any) -> None:
        item = self.conv_list.itemAt(pos)
        if item is None or item.data(Qt.ItemDataRole.UserRole) is None:
            return
        if int(item.data(Qt.ItemDataRole.UserRole)) != self.conversation_id:
            self._conversation_selected(item)
            if int(item.data(Qt.ItemDataRole.UserRole)) != self.conversation_id:
                return  # not opened (an answer is streaming): act on nothing
            self.conv_list.setCurrentItem(item)
        self.context_menu = self._conversation_actions(QMenu(self))
        self.context_menu.popup(self.conv_list.viewport().mapToGlobal(pos))

    def _switch_draft(self, to: int | None) -> None:
        """Keep the unsent prompt and attached files with the conversation they were added in
        (they would be sent there, never in another chat); bring back `to`'s."""
        if to == self.conversation_id:
            return
        text, files = self.prompt.toPlainText(), self.attachments.items()
        keep = self.asking.editing is None  # an edit in progress (its files as chips too) is dropped, not kept
        if text.strip() and keep:
            self._drafts[self.conversation_id] = text
        else:
            self._drafts.pop(self.conversation_id, None)
        if files and keep:
            self._pending_files[self.conversation_id] = files
        else:
            self._pending_files.pop(self.conversation_id, None)
        self.prompt.setPlainText(self._drafts.pop(to, ""))
        self.attachments.set_items(self._pending_files.pop(to, []))

    def open_conversation(self, conversation_id: int) -> None:
        self._switch_draft(conversation_id)
        self.conversation_id = conversation_id
        conv = self.history.get(conversation_id)
        saved = chat_settings(self.history, conversation_id)
        if saved is not None:  # the chat's own settings (a chat from before has none: the controls stay)
            self._opening = True
            try:
                self.apply_settings({**saved, "system": conv.system_prompt if conv else ""})
            finally:
                self._opening = False
        elif conv is not None:
            self.system.setPlainText(conv.system_prompt)
        try:
            msgs = self.history.messages(conversation_id)
        except HistoryError as e:  # a damaged page: say so where the conversation would be
            self.transcript.set_messages([])
            self.transcript.setPlainText(f"⚠ This conversation could not be read.\n\n{e}")
            self.stats_label.clear()
            return
        self.transcript.set_messages(msgs)
        self.stats_label.setText(last_answer_stats(msgs))
        self._clear_notes()

    def new_conversation(self) -> None:
        if self.worker is not None:
            return
        self._switch_draft(None)
        self.conversation_id = None
        self.transcript.set_messages([])
        self.stats_label.clear()
        self._clear_notes()
        self.charts.reset()
        self.conv_list.blockSignals(True)
        self.conv_list.setCurrentRow(-1)  # so a click on the previous chat is a change again
        self.conv_list.blockSignals(False)
        self._close_floating_chats()
        self.prompt.setFocus()

    def _clear_notes(self) -> None:
        """Notes about the last answer belong to it: another conversation starts without them
        (the lookahead Auto last used too)."""
        for label in (self.auto_note, self.context_note):
            label.clear()
            label.hide()
        self.lookahead.clear_in_use()
        self.meter.schedule()

    def rename_conversation(self) -> None:
        if self.conversation_id is None:
            return
        conv = self.history.get(self.conversation_id)
        self.rename_dialog = dialog = rename_dialog(self, conv.title if conv else "")
        if dialog.exec() and dialog.textValue().strip():
            self.history.rename(self.conversation_id, dialog.textValue())
            self.refresh_conversations()

    def delete_conversation(self) -> None:
        if self.conversation_id is None or self.worker is not None:
            return
        conv = self.history.get(self.conversation_id)
        if QMessageBox.question(self, "Delete conversation", f"Delete “{conv.title if conv else ''}”?") != QMessageBox.StandardButton.Yes:
            return
        self.history.delete(self.conversation_id)
        self.asking.cancel_edit()  # nothing unsent of a deleted chat is kept
        self.new_conversation()
        self.refresh_conversations()


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
