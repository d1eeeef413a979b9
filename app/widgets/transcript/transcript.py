"""The conversation as a document: answers rendered as Markdown (provenance as a tint over
the rendered text), user messages verbatim, the streaming answer rendered as it arrives, a
line of actions under each message, and a "Jump to latest" button.

Streaming is cheap on purpose: tokens are merged into runs of one provenance and shown at
most every STREAM_INTERVAL_MS, in one edit block at the end of the document, where only
the answer's open last block is rendered again (markdown_stream.py); the finished blocks
before it stay as they are. At `end_stream` the stored answer is rendered once more,
whole, with its badge.

Why a few renders a second and not one per frame: on a machine whose cores all compute
the answer (llama.cpp's threads, one per core), every millisecond the GUI thread runs is
taken from a compute thread, and the other one waits for it at the next barrier. Each
render (Markdown, highlighting, the tint, the relayout and repaint it causes) costs about
the same whatever it adds, so fewer renders that each add more text cost less.

The view follows the stream while its bottom is in sight; once the user scrolls up it
stays where they are and shows the button, which scrolls to the end and follows again.
"""

from __future__ import annotations

import time
from typing import Callable

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor, QContextMenuEvent, QDesktopServices, QFont, QGuiApplication, QResizeEvent, QTextBlockFormat,
    QTextCharFormat, QTextCursor,
)
from PySide6.QtWidgets import QLabel, QPushButton, QTextBrowser, QWidget

from ...history import Message, stop_reason
from ..attachments.attachments import split_attachments
from .call_card import call_cards
from .file_card import FileViewer, file_card
from .picture_card import image_refs, open_picture, picture_row
from .markdown_render import COPY_SCHEME, append_rendered, code_wraps, render_markdown, plain_text, set_code_wrap
from .markdown_stream import MarkdownStream
from .provenance import COLOURS, merge_runs
from .sources import SCHEME_ACTION as SOURCE_ACTION, insert_sources, link_citations
from ..controls.toast import toast
from .user_text import insert_user_text

ROLE_TITLES = {"user": "You", "assistant": "Assistant", "system": "System"}
FRAME_MS = 33  # the first tokens of an answer show within a frame
STREAM_INTERVAL_MS = 200  # after that, the streaming answer is rendered at most 5 times a second
AT_END_SLACK = 4  # pixels from the bottom that still count as "at the end"
JUMP_PAD = 3  # pixels above and below the "Jump to latest" button in its strip
ACTION_SCHEME = "msg"
BADGE_BG = QColor(240, 136, 62, 70)
LINK = QColor(56, 132, 244)
MUTED = QColor(128, 128, 128)


VERSION_TIPS = {"older": "Show the previous version of this {what} ({n} of {of})",
                "newer": "Show the next version of this {what} ({n} of {of})"}
LINK_TIPS = {"fork": "Start a new chat holding the conversation up to this answer",
             "delete": "Delete this message (an answer's or an edited message's shown version); asks first"}


class Transcript(QTextBrowser):
    messageAction = Signal(str, int)  # (edit | regenerate | continue | older | newer | delete | fork, message id)
    notice = Signal(str)  # a one-line notice for the status bar ("Code copied")
    sourceClicked = Signal(int, int)  # (answer's message id, source number): a Library answer's [n] clicked
    codeWrapChanged = Signal(bool)  # the context menu's "Wrap long code lines" (the window keeps it)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setOpenLinks(False)  # every link comes to _on_anchor: copy:, msg: and web links
        self.anchorClicked.connect(self._on_anchor)
        self.setReadOnly(True)
        self.show_provenance = True
        # (tokens, exact) of a text with the loaded model's tokenizer, for the file cards (the chat sets it)
        self.count_tokens: Callable[[str], tuple[int, bool]] | None = None
        self.load_image: Callable[[str], bytes | None] | None = None  # a question's picture by sha256 (the history's)
        self._stream_start: int | None = None
        self._stream_head: int | None = None  # where the streaming answer's header begins
        self._messages: list[Message] = []
        self._code_blocks: list[str] = []  # the code of every rendered block, index = N of copy:N
        self._tail_actions: tuple[int, Message] | None = None  # where the last message's action line starts
        self._pending: list[list[str]] = []  # [provenance, text] runs waiting for the next frame
        self._stream_cursor: QTextCursor | None = None
        self._stream: MarkdownStream | None = None
        self._frame = QTimer(self)
        self._frame.setSingleShot(True)
        self._frame.setInterval(FRAME_MS)
        self._frame.timeout.connect(self.flush)
        self._rendered_at = float("-inf")  # when the streaming answer was last rendered (time.monotonic)
        self._progress = QLabel(self.viewport())  # what the answer waits for, where it will appear
        self._progress.setObjectName("answerProgress")
        self._progress.setStyleSheet("font-style: italic; color: gray; background: transparent;")
        self._progress.hide()
        self.edits = 0  # streaming edits of the document, one per frame at most (tests, benchmark)
        self.renders = 0  # Markdown renderings of answers (tests, benchmark)
        self.setUndoRedoEnabled(False)  # a read-only view: no undo history to grow per token
        self.document().setDocumentMargin(12)
        self.following = True
        self.jump_btn = QPushButton("Jump to latest ↓", self)
        self.jump_btn.setObjectName("jumpToLatest")
        self.jump_btn.setToolTip("Scroll to the end and follow the answer again")
        self.jump_btn.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a click must not move the text cursor or focus
        self.jump_btn.clicked.connect(self.jump_to_latest)
        self.jump_btn.hide()
        self.verticalScrollBar().valueChanged.connect(self._on_scrolled)

    # -- following the stream ------------------------------------------------------------
    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - AT_END_SLACK

    def _on_scrolled(self, _value: int) -> None:
        """A scroll moved the view (the user's, or ours to the end): follow exactly when the
        bottom is in sight. Growth of the document alone moves nothing, so it lands nowhere here."""
        self.following = self._at_end()
        self._show_jump(not self.following)

    def jump_to_latest(self) -> None:
        self.following = True
        self._scroll_to_end()
        self._show_jump(False)

    def _show_jump(self, show: bool) -> None:
        """The button lives in a strip under the text that the viewport gives up while it is
        shown, so it never covers a line of the answer (a code line least of all)."""
        if show != self.jump_btn.isVisibleTo(self):
            self.jump_btn.setVisible(show)
            self.setViewportMargins(0, 0, 0, self.jump_btn.sizeHint().height() + 2 * JUMP_PAD if show else 0)
        if show:
            self._place_jump_button()

    def _place_jump_button(self) -> None:
        self.jump_btn.adjustSize()
        vp = self.viewport().geometry()
        x = vp.x() + (vp.width() - self.jump_btn.width()) // 2
        self.jump_btn.move(max(0, x), vp.bottom() + 1 + JUMP_PAD)
        self.jump_btn.raise_()

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        if self.following:
            self._scroll_to_end()
        self._place_jump_button()

    def _scroll_to_end(self) -> None:
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())

    # -- whole conversation --------------------------------------------------------------
    def set_messages(self, messages: list[Message]) -> None:
        """Show `messages`. When they only add to what is shown (Send: one more user message)
        just the new ones are rendered, so a long conversation is not laid out again."""
        n = len(self._messages)
        if 0 < n < len(messages) and self._stream_start is None and messages[:n] == self._messages:
            for i, m in enumerate(messages[n:], start=n):
                self._append_message(m, last=i == len(messages) - 1)
            self._messages = list(messages)
            self.jump_to_latest()
            return
        self._render_all(messages)

    def _render_all(self, messages: list[Message]) -> None:
        self._messages = list(messages)
        self._tail_actions = None
        self.clear()
        self._code_blocks = []
        self._stream_start = None
        self._stream_head = None
        self._stream_cursor = None
        self._stream = None
        self._pending = []
        for i, m in enumerate(messages):
            self._append_message(m, last=i == len(messages) - 1)
        self.jump_to_latest()

    def contextMenuEvent(self, e: QContextMenuEvent) -> None:
        menu = self.createStandardContextMenu(e.pos())
        wrap = menu.addAction("Wrap long code lines")
        wrap.setCheckable(True)
        wrap.setChecked(code_wraps())
        wrap.toggled.connect(self.set_code_wrap)
        menu.exec(e.globalPos())
        menu.deleteLater()

    def set_code_wrap(self, on: bool) -> None:
        """Wrap long code lines (else they stay whole and the transcript scrolls sideways)."""
        set_code_wrap(on)
        self.codeWrapChanged.emit(on)
        self.show_in_place(self._messages)

    def set_show_provenance(self, on: bool) -> None:
        self.show_provenance = on
        self.show_in_place(self._messages)

    def show_in_place(self, messages: list[Message]) -> None:
        """Show `messages` again where the reader is (another version chosen, another model
        counting the file cards' tokens); nothing while an answer streams."""
        if self._stream_start is not None:
            return
        bar = self.verticalScrollBar()
        keep, follow = bar.value(), self.following
        self._render_all(messages)
        if not follow:
            bar.setValue(keep)

    def last_answer_id(self) -> int | None:
        return next((m.id for m in reversed(self._messages) if m.role == "assistant"), None)

    def _header(self, cursor: QTextCursor, role: str, badge: str | None = None) -> None:
        if not self.document().isEmpty():
            cursor.insertBlock(QTextBlockFormat())
            cursor.insertBlock(QTextBlockFormat())
        fmt = QTextCharFormat()
        fmt.setFontWeight(QFont.Weight.Bold)
        cursor.insertText(ROLE_TITLES.get(role, role), fmt)
        if badge:
            cursor.insertText("  ", QTextCharFormat())
            b = QTextCharFormat()
            b.setBackground(BADGE_BG)
            b.setToolTip({"stopped: max tokens": "The answer reached Max tokens: Continue writes more",
                          "stopped by you": "You stopped this answer: Continue writes more",
                          "interrupted": "Tandem ended while this answer was being written: what had arrived "
                                         "is kept. Continue writes more"}.get(badge, ""))
            cursor.insertText(f" {badge} ", b)

    def _append_message(self, m: Message, last: bool) -> None:
        cursor = self.textCursor()
        self._demote_tail(cursor)
        cursor.movePosition(QTextCursor.MoveOperation.End)
        reason = stop_reason(m)
        self._header(cursor, m.role, reason)
        if m.role == "assistant":
            call_cards(cursor, m.tool_calls)
            spans = m.spans if self.show_provenance else None
            rendered = render_markdown(m.content, spans, self._colours(), first_copy=len(self._code_blocks))
            self.renders += 1
            self._code_blocks.extend(rendered.code_blocks)
            link_citations(rendered.document, m, ACTION_SCHEME, LINK)
            append_rendered(cursor, rendered.document)
            insert_sources(cursor, m, ACTION_SCHEME, LINK, MUTED)
        else:  # verbatim: newlines and indentation as typed, code in monospace; files as cards
            typed, files = split_attachments(m.content, m.spans)
            cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            insert_user_text(cursor, typed)
            pics = image_refs(m.spans)
            picture_row(cursor, pics, self.load_image, first=not typed, ratio=self.devicePixelRatioF())
            for i, (name, text) in enumerate(files):
                file_card(cursor, name, text, f"{ACTION_SCHEME}:file:{m.id}:{i}", first=not (typed or i or pics),
                          tokens=self.count_tokens(text) if self.count_tokens is not None else None)
        self._actions(cursor, m, last, reason)

    def _demote_tail(self, cursor: QTextCursor) -> None:
        """The message shown last is about to have a successor: its action line (the end of
        the document) loses the links only the last answer has (Regenerate, Continue)."""
        tail, self._tail_actions = self._tail_actions, None
        if tail is None:
            return
        start, m = tail
        cursor.setPosition(start)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        self._actions(cursor, m, False, stop_reason(m))
        self._tail_actions = None

    def _actions(self, cursor: QTextCursor, m: Message, last: bool, reason: str | None) -> None:
        """A small line of links under the message; which ones depends on its role and place."""
        self._tail_actions = (cursor.position(), m)
        acts: list[tuple[str, str]] = []
        if m.versions > 1:  # "‹ 2/3 ›": links, so Tab reaches them and Enter follows
            acts.append(("older" if m.version > 1 else "", "\u2002‹\u2002"))  # en spaces: a wider target to click
            acts.append(("", f"{m.version}/{m.versions}"))
            acts.append(("newer" if m.version < m.versions else "", "\u2002›\u2002"))
        if m.role == "user":
            acts.append(("edit", "Edit"))
        elif m.role == "assistant" and last:
            acts.append(("regenerate", "Regenerate"))
            if reason in ("stopped by you", "stopped: max tokens", "interrupted") and m.content:
                acts.append(("continue", "Continue"))
        acts += [("copy-text", "Copy as text"), ("copy-markdown", "Copy as Markdown")]
        if m.role == "assistant" and m.status != "generating":
            acts.append(("fork", "Fork"))
        acts.append(("delete", "Delete"))
        block = QTextBlockFormat()
        block.setTopMargin(4)
        cursor.insertBlock(block, QTextCharFormat())
        small = QFont()
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.85))
        sep = QTextCharFormat()
        sep.setForeground(MUTED)
        sep.setFont(small, QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly)
        for i, (key, label) in enumerate(acts):
            if i:
                cursor.insertText("" if i < 3 and m.versions > 1 else "  ·  ", sep)
            if not key:  # the version label, or an arrow with nowhere to go
                cursor.insertText(label, sep)
                continue
            link = QTextCharFormat(sep)
            link.setForeground(LINK)
            link.setAnchor(True)
            link.setAnchorHref(f"{ACTION_SCHEME}:{key}:{m.id}")
            if key in VERSION_TIPS:
                link.setToolTip(VERSION_TIPS[key].format(n=m.version + (1 if key == "newer" else -1), of=m.versions,
                                                        what="answer" if m.role == "assistant" else "message"))
            link.setToolTip(LINK_TIPS.get(key, link.toolTip()))
            cursor.insertText(label, link)
        cursor.setCharFormat(QTextCharFormat())

    def _colours(self) -> dict[str, QColor]:
        return COLOURS

    # -- links ---------------------------------------------------------------------------
    def _on_anchor(self, url: QUrl) -> None:
        scheme = url.scheme()
        if scheme == COPY_SCHEME and url.path().isdigit():
            self.copy_code(int(url.path()))
        elif scheme == ACTION_SCHEME:
            action, _, ident = url.path().partition(":")
            if action == "file":
                self._open_file(ident)
            elif action == "picture":  # a thumbnail: the picture whole
                self.file_view = open_picture(self, ident, [r for m in self._messages for r in image_refs(m.spans)],
                                              self.load_image)
            elif action == SOURCE_ACTION and ident.replace(":", "").isdigit() and ident.count(":") == 1:
                self.sourceClicked.emit(*(int(x) for x in ident.split(":")))
            elif ident.isdigit():
                self._message_action(action, int(ident))
        elif scheme in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)

    def copy_code(self, n: int) -> None:
        """Put code block `n` (exactly its code, no fence or label) on the clipboard."""
        codes = self._code_blocks + (self._stream.code_blocks if self._stream is not None else [])
        if 0 <= n < len(codes):
            QGuiApplication.clipboard().setText(codes[n])
            self.notice.emit("Code copied")
            toast(self, "Code copied")

    def _open_file(self, ident: str) -> None:
        """A file card clicked: the attached text in a window of its own."""
        mid, _, index = ident.partition(":")
        m = self.message(int(mid)) if mid.isdigit() else None
        files = split_attachments(m.content, m.spans)[1] if m is not None else []
        if index.isdigit() and int(index) < len(files):
            self.file_view = FileViewer(*files[int(index)], parent=self)
            self.file_view.show()

    def message(self, message_id: int) -> Message | None:
        return next((m for m in self._messages if m.id == message_id), None)

    def _message_action(self, action: str, message_id: int) -> None:
        m = self.message(message_id)
        if m is None:
            return
        if action == "copy-markdown":
            QGuiApplication.clipboard().setText(m.content)
            self.notice.emit("Copied as Markdown")
            toast(self, "Copied as Markdown")
        elif action == "copy-text":
            QGuiApplication.clipboard().setText(message_text(m))
            self.notice.emit("Copied as text")
            toast(self, "Copied as text")
        elif action in ("edit", "regenerate", "continue", "older", "newer", "delete", "fork"):
            self.messageAction.emit(action, message_id)

    # -- streaming -----------------------------------------------------------------------
    def begin_stream(self, calls: list | None = None) -> None:
        """Open the answer being written at the end; `calls`: the tool calls it has made, as
        cards under its header (again at each call: the streamed text before it was the call)."""
        self._pending = []
        self._rendered_at = float("-inf")
        cursor = QTextCursor(self.document())
        if calls is not None and self._stream_head is not None:  # the answer's header and text go, to be redone
            cursor.setPosition(self._stream_head)
            cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
        self._demote_tail(cursor)
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self._stream_head = cursor.position()
        self._header(cursor, "assistant")
        call_cards(cursor, calls or [])
        self._stream_start = cursor.position()  # the answer's blocks go after the header's
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())  # where the progress line shows, until the first render
        self._stream_cursor = cursor
        colours = self._colours() if self.show_provenance else None
        self._stream = MarkdownStream(self.document(), self._stream_start, colours, first_copy=len(self._code_blocks))
        if self.following:
            self._scroll_to_end()

    def set_progress(self, text: str) -> None:
        """Say what the streaming answer is waiting for ("Reading the prompt… 40%"), where its
        first token will appear, until it does. A label over the page: the document (and the
        answer's text) is not edited for it."""
        self._progress.setText(text)
        if not text or self._stream_cursor is None:
            self._progress.hide()
            return
        self._progress.adjustSize()
        r = self.cursorRect(self._stream_cursor)
        self._progress.move(r.left() + 2, r.top())
        self._progress.show()

    def progress_text(self) -> str:
        """The progress line shown now ("" when none)."""
        return self._progress.text() if self._progress.isVisibleTo(self) else ""

    def append_tokens(self, tokens: list) -> None:
        """tokens: engine TokenEvents (text, provenance), queued for the next frame."""
        if self._stream_start is None:
            return
        pending = merge_runs(self._pending, tokens, coloured=self.show_provenance)
        if pending and not self._frame.isActive():
            self._frame.start(self.next_render_ms())

    def next_render_ms(self) -> int:
        """How long queued tokens wait: a frame, and at least STREAM_INTERVAL_MS after the
        last render (tokens that arrive meanwhile join them)."""
        since_ms = min((time.monotonic() - self._rendered_at) * 1000, STREAM_INTERVAL_MS)
        return max(FRAME_MS, round(STREAM_INTERVAL_MS - since_ms))

    def flush(self) -> None:
        """Show the queued runs now: one edit block that renders the answer's open tail again."""
        self._frame.stop()
        runs, self._pending = self._pending, []
        stream = self._stream
        if not runs or stream is None:
            return
        stream.add(runs)
        if not stream.render():  # all of it held back (a fence being typed): nothing to show yet
            return
        self._progress.hide()  # the answer's own text takes its place
        self._rendered_at = time.monotonic()
        self.edits += 1
        if self.following:
            self._scroll_to_end()

    @property
    def stream_renders(self) -> int:
        """Pieces of the streaming answer rendered so far (finished blocks and tails)."""
        return self._stream.renders if self._stream is not None else 0

    def stream_source(self) -> str:
        """The streaming answer's Markdown received and shown so far (after `flush`)."""
        return self._stream.source if self._stream is not None else ""

    def stream_text(self) -> str:
        """The streaming answer as rendered so far (after `flush`): what a reader sees."""
        return self._stream.text() if self._stream is not None else ""

    def end_stream(self, message: Message) -> None:
        """Replace the streamed text by the stored message's rendering (that answer alone:
        the rest of the conversation is not laid out again)."""
        self._frame.stop()
        self._pending = []
        self._progress.hide()
        head = self._stream_head
        self._stream_start = None
        self._stream_head = None
        self._stream_cursor = None
        self._stream = None
        self._messages.append(message)
        if head is None:
            self._render_all(self._messages)
            return
        bar = self.verticalScrollBar()
        keep, follow = bar.value(), self.following
        cursor = QTextCursor(self.document())
        cursor.beginEditBlock()
        cursor.setPosition(head)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.endEditBlock()
        self._append_message(message, last=True)
        if follow:
            self.jump_to_latest()
        else:
            bar.setValue(keep)


def message_text(m: Message) -> str:
    """A message as plain text: an answer's Markdown rendered (no fences, no ``**``; list
    markers kept), a user's message as typed."""
    if m.role != "assistant":
        return m.content
    return plain_text(render_markdown(m.content).document)


def spans_from_tokens(tokens: list) -> list[tuple[int, str]]:
    """Run-length (characters, provenance) spans from TokenEvents, for storage."""
    spans: list[tuple[int, str]] = []
    for ev in tokens:
        if not ev.text:
            continue
        if spans and spans[-1][1] == ev.provenance:
            spans[-1] = (spans[-1][0] + len(ev.text), ev.provenance)
        else:
            spans.append((len(ev.text), ev.provenance))
    return spans
