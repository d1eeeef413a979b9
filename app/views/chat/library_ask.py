"""Asking a Library folder from the chat: the box under the prompt that chooses the folder
(kept with the chat, in its settings), the question's prompt built from the engine's best
passages with their numbers (engine.library: search, fit_to_context, source_entry; nothing is
ranked here), the sources kept with the answer, and a source clicked: its file opened (a PDF at
the cited page where the viewer can) and the passage shown in the side pane, with the page."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QComboBox

from ...library_shelf import LibraryShelf
from ...widgets.panels.source_pane import SourcePane, pdf_page, source_file
from ...widgets.transcript.sources import source_of
from ...widgets.transcript.transcript import Transcript

TOP = 6  # passages retrieved, best first (as `tandem ask`'s default); those that fit the context are used
SETTING = "library"  # the chat settings' key for its folder
NONE = "No library"


class LibraryAsk(QObject):
    """The chat's Library folder and what asking it takes."""

    edited = Signal()  # the user chose another folder for the open chat

    def __init__(self, shelf: LibraryShelf | None, box: QComboBox, pane: SourcePane, transcript: Transcript,
                 notify: Callable[[str], None], fail: Callable[[str], None], parent: QObject | None = None):
        super().__init__(parent)
        self._shelf, self._box, self._pane, self._transcript = shelf, box, pane, transcript
        self._notify, self._fail = notify, fail
        self._filling = False
        box.setToolTip("Answer from a Library folder: its best passages go into the prompt, the answer cites "
                       "them as [1], [2] and lists them under it (add folders in Library)")
        box.currentIndexChanged.connect(lambda _i: None if self._filling else self.edited.emit())
        transcript.sourceClicked.connect(self.open_source)
        pane.openFile.connect(self.open_file)
        pane.openFolder.connect(self.open_folder)
        if shelf is not None:
            shelf.changed.connect(lambda _f: self.refill())
        self.refill()

    # -- the folder ------------------------------------------------------------------------
    def refill(self) -> None:
        """The box's folders from the shelf, the choice kept (hidden while the Library is empty)."""
        keep = self.folder()
        folders = self._shelf.folders() if self._shelf is not None else []
        self._filling = True
        try:
            self._box.clear()
            self._box.addItem(NONE, "")
            for folder in folders:
                self._box.addItem(f"Library: {self._shelf.name(folder)}", folder)
                self._box.setItemData(self._box.count() - 1, folder, Qt.ItemDataRole.ToolTipRole)
            self._box.setCurrentIndex(max(0, self._box.findData(keep or "")))
        finally:
            self._filling = False
        self._box.setVisible(bool(folders))

    def folder(self) -> str | None:
        return self._box.currentData() or None

    def set_folder(self, folder: str | None) -> None:
        """The chat's stored folder chosen (none, or one no longer in the Library: none)."""
        self._filling = True
        try:
            self._box.setCurrentIndex(max(0, self._box.findData(folder or "")))
        finally:
            self._filling = False

    def values(self) -> dict[str, Any]:
        """What the chat keeps of the choice (beside its generation settings)."""
        return {SETTING: self.folder() or ""}

    # -- asking ------------------------------------------------------------------------------
    def prepare(self, engine: Any, chat: list[dict], question: str, system: str,
                max_tokens: int) -> tuple[list[dict], list[dict]] | None:
        """`chat` (its last message the question) with the question's turn holding the folder's
        passages that fit the context, numbered; and the sources to keep with the answer. None
        after saying why not (a damaged index, no room for the question)."""
        from engine.errors import TandemError
        from engine.library import fit_to_context, source_entry

        folder = self.folder()
        assert folder is not None and self._shelf is not None
        try:
            hits = self._shelf.search(folder, question, TOP)
        except TandemError as e:
            self._fail(str(e))
            return None
        prior = ([{"role": "system", "content": system}] if system else []) + chat[:-1]
        try:
            used = len(engine.tokens_for(prior, chat=True)) if prior else 0
            ask = fit_to_context(lambda text, as_chat: len(engine.tokens_for(text, chat=as_chat)),
                                 chat[-1]["content"], hits, True, engine.n_ctx - max_tokens - used)
        except TandemError as e:  # a chat template that cannot render the prompt
            self._fail(str(e))
            return None
        if ask is None:
            self._fail(f"The context ({engine.n_ctx:,} tokens) leaves no room for the question and its sources beside "
                       f"Max tokens ({max_tokens:,}): lower Max tokens or start a new chat")
            return None
        name = self._shelf.name(folder)
        if not hits:
            self._notify(f"No passage in {name} shares a word with the question: answered without sources")
        elif not ask.sources:
            self._notify(f"None of the passages found in {name} fits the context: answered without sources")
        sources = [{**source_entry(i + 1, h), "where": h.where, "unit": h.unit, "anchor": h.anchor, "text": h.text,
                    "folder": folder} for i, h in enumerate(ask.sources)]
        return chat[:-1] + [{"role": "user", "content": ask.text}], sources

    @staticmethod
    def prompt_again(question: str, sources: list[dict]) -> str:
        """The question's turn as it was asked, from the sources kept with its answer (Continue
        goes on from the passages the answer was given; the folder is not searched again)."""
        from engine.library import Hit, fit_prompt

        hits = [Hit(str(s.get("file", "")), str(s.get("unit", "section")), str(s.get("anchor", s.get("where", ""))),
                    str(s.get("text", "")), float(s.get("score", 0.0))) for s in sources]
        return fit_prompt(question, hits, lambda _text: 0, 1 << 30).text  # all fit: they were fitted when asked

    # -- a source clicked -----------------------------------------------------------------------
    def open_source(self, message_id: int, n: int) -> None:
        """Answer `message_id`'s source `n`: the passage in the side pane, the file opened."""
        source = source_of(self._transcript.message(message_id), n)
        if source is None:
            return
        path = source_file(source)
        note = "" if path is not None and path.is_file() else \
            "The file is no longer in the folder: the passage as the answer was given it."
        self._pane.show_source(source, note)
        if not note:
            self.open_file(source)

    def open_file(self, source: dict) -> None:
        """The source's file in the program the system opens it with; a PDF's page as a
        `file:…#page=N` URL, which browsers, Evince and Okular open at that page (a viewer that
        does not opens it at its start: the notice says which page)."""
        path = source_file(source)
        if path is None or not path.is_file():
            self._notify(f"{source.get('file', 'The file')} is no longer in the folder")
            return
        url, page = QUrl.fromLocalFile(str(path)), pdf_page(source)
        if page is None:
            QDesktopServices.openUrl(url)
            self._notify(f"Opened {source['file']} ({source.get('where') or 'its passage in the pane'})")
            return
        at_page = QUrl(url)
        at_page.setFragment(f"page={page}")
        if not QDesktopServices.openUrl(at_page):  # no program for the URL as it is: the file itself
            QDesktopServices.openUrl(url)
        self._notify(f"Opened {source['file']} at page {page} (a viewer that opens it at its start: go to page {page})")

    def open_folder(self, source: dict) -> None:
        """The folder that holds the source's file, in the system's file manager."""
        path = source_file(source)
        if path is None or not path.parent.is_dir():
            self._notify(f"The folder of {source.get('file', 'the file')} is gone")
            return
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(path.parent)))
        self._notify(f"Opened the folder of {source['file']}")
