"""The cited page of a PDF, in the source pane: rendered by the engine (engine.documents.pdf_page:
PDFium, bounded in pixels) on a worker thread, so a slow or huge page never freezes the window,
then scaled to the pane's width. One line under it says which page it is, or why it cannot be
shown (the file gone, locked or damaged); the passage's text stays beside it either way."""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QImage, QPixmap, QResizeEvent
from PySide6.QtWidgets import QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from ... import workers

RENDER_MIN_WIDTH = 480  # logical pixels: a page rendered for a narrow pane still reads when the pane is widened
SHARPER = 1.2  # the pane widened past 1.2 times the rendered width: the page is rendered again at the new width


class PdfPageView(QWidget):
    """Shows page `page` of a PDF; `shown(ok)` once the page is drawn (True) or refused (False)."""

    shown = Signal(bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("pdfPageView")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.image = QLabel()
        self.image.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.image.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(self.image)
        self.line = QLabel("")  # "Page 2 of 3", or why the page cannot be shown
        self.line.setWordWrap(True)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.scroll, 1)
        lay.addWidget(self.line)
        self.picture: QImage | None = None  # the page as rendered (kept to scale again on resize)
        self.render_seconds = 0.0  # the last render's time on its thread, for measuring
        self._serial = 0  # the request shown; a slower, older render's result is dropped
        self._worker: workers.CallWorker | None = None
        self._asked: tuple[Path, int] | None = None  # the page shown, to render again when the pane widens
        self._again = QTimer(self)  # once the user stops dragging the pane wider
        self._again.setSingleShot(True)
        self._again.setInterval(200)
        self._again.timeout.connect(self._render_wider)

    def show_page(self, path: Path, page: int) -> None:
        """Render `page` of `path` off the GUI thread; the pane shows the line meanwhile."""
        self._asked = (path, page)
        self.picture = None
        self.image.clear()
        self.scroll.hide()
        self.line.setText(f"Page {page}: rendering…")
        self._render(path, page)

    def _render(self, path: Path, page: int) -> None:
        from engine.documents.pdf_page import render_page

        self._serial += 1
        serial, width = self._serial, self._render_width()

        def render() -> tuple[int, object, float]:
            from engine.errors import TandemError

            t0 = time.perf_counter()
            try:
                result: object = render_page(path, page, width)
            except TandemError as e:  # PageError: gone, locked, damaged, no such page
                result = str(e)
            return serial, result, time.perf_counter() - t0

        w = workers.CallWorker(render)
        w.result.connect(self._rendered)
        w.failed.connect(self._failed)
        self._worker = w
        workers.start(w)

    def clear(self) -> None:
        """Nothing shown (another source, or not a PDF page); a render under way is dropped."""
        self._serial += 1
        self._asked = None
        self.picture = None
        self.image.clear()
        self.line.setText("")

    def _render_width(self) -> int:
        width = max(self.scroll.viewport().width(), self.width(), RENDER_MIN_WIDTH)
        return round(width * self.devicePixelRatioF())

    def _rendered(self, done: tuple) -> None:
        serial, result, seconds = done
        if serial != self._serial:
            return
        if isinstance(result, str):
            self.line.setText(f"The page cannot be shown: {result}")
            self.shown.emit(False)
            return
        self.render_seconds = seconds
        self.picture = QImage(result.rgb, result.width, result.height, result.stride,
                              QImage.Format.Format_RGB888).copy()  # its own pixels: `result` may go
        self.line.setText(f"Page {result.page} of {result.pages}")
        self.scroll.show()
        self._fit()
        self.shown.emit(True)

    def _failed(self, text: str) -> None:  # not a PageError: a bug, said in one line all the same
        self.line.setText(f"The page cannot be shown: {text}")
        self.shown.emit(False)

    def _fit(self) -> None:
        if self.picture is None:
            return
        ratio = self.devicePixelRatioF()
        width = max(1, round(self.scroll.viewport().width() * ratio))
        shown = QPixmap.fromImage(self.picture.scaledToWidth(min(width, self.picture.width()),
                                                             Qt.TransformationMode.SmoothTransformation))
        shown.setDevicePixelRatio(ratio)
        self.image.setPixmap(shown)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit()
        if self.picture is not None and self._render_width() > self.picture.width() * SHARPER:
            self._again.start()

    def _render_wider(self) -> None:
        """The same page at the pane's new width; the one shown stays until it is ready."""
        from engine.documents.pdf_page import PAGE_MAX_WIDTH

        if self._asked is not None and self.picture is not None and self.picture.width() < PAGE_MAX_WIDTH:
            self._render(*self._asked)
