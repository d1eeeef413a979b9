"""The chat's side panels and how they follow the window: the settings drawer (generation
settings and live charts, at the right; F9) and the conversation list (at the left).

Each docks in the page's splitter while it fits beside the transcript, and floats over the
transcript's edge when it does not (app/widgets/controls/reflow.py), so the page never scrolls
sideways: the drawer first (an open drawer docks in place of the conversation list, which
then opens from a "Chats" button), both floating in the narrowest window. A Library source's
pane, while it is open, docks beside the transcript (the others float first to make room for
it) and floats over the transcript's right edge where even that is not enough.

`SidePanels` is the page's: it is given the page (whose width it follows and where its F9
shortcut lives), the conversation list, the answer column and the settings panel, and the
page tells it when it was resized.
"""

from __future__ import annotations


from PySide6.QtCore import QObject
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QScrollArea, QSplitter, QToolButton, QVBoxLayout, QWidget

from ...widgets.controls.reflow import SLACK, SideOverlay, overflow

DRAWER_OPEN_WIDTH = 1100  # the settings drawer starts closed in a narrower window
DRAWER_MIN_WIDTH = 240  # the drawer scrolls rather than widening the window
DRAWER_OPEN_SIZE = 380  # its width when opened
CHATS_OVERLAY_WIDTH = 260  # the conversation list floating over the transcript
CHATS_DOCK_SIZE = 200  # its width docked
SOURCE_OVERLAY_WIDTH = 320  # a Library source's pane floating over the transcript


class SidePanels(QObject):
    """The chat page's two side panels: the settings drawer and the conversation list's dock.

    Built in the splitter's order: `dock_conversations` first (its "Chats" button goes in
    the answer column's bar), then `add_drawer` beside the answer column."""

    def __init__(self, page: QWidget) -> None:
        super().__init__(page)
        self._page = page
        self._middle: QWidget | None = None  # the answer column, once the drawer is beside it
        self._chats_overlay: SideOverlay | None = None
        self._drawer_overlay: SideOverlay | None = None
        self._source_overlay: SideOverlay | None = None
        self._source_dock: QWidget | None = None
        self._fitting_source = False  # moving the pane hides it a moment (Qt's reparenting): not a close

    @property
    def chats_overlay(self) -> SideOverlay | None:
        """The conversation list's overlay (floating over the transcript in a narrow window)."""
        return self._chats_overlay

    def add_drawer(self, panel: QWidget, beside: QWidget) -> QWidget:
        """The settings and charts in a drawer that a narrow window keeps closed.

        The panel scrolls inside it, so it never sets the window's minimum width; the
        toggle stays visible when it is closed. Until the user opens or closes it, it
        follows the window: open from DRAWER_OPEN_WIDTH px, closed below. `beside`: the
        answer column, whose minimum decides what still docks.
        """
        self._middle = beside
        page = self._page
        drawer = self._drawer_widget = QWidget()
        drawer.setObjectName("settingsDrawer")
        lay = QHBoxLayout(drawer)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        self.drawer_btn = QToolButton()
        self.drawer_btn.setCheckable(True)
        self.drawer_btn.setChecked(True)
        self.drawer_btn.setToolTip("Show or hide the generation settings and live charts (F9)")
        self.drawer_btn.setAutoRaise(True)
        self.drawer_btn.clicked.connect(self.drawer_clicked)
        col = QVBoxLayout()
        col.addWidget(self.drawer_btn)
        col.addStretch(1)
        lay.addLayout(col)
        self.drawer_scroll = QScrollArea()
        self.drawer_scroll.setWidgetResizable(True)
        self.drawer_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.drawer_scroll.setWidget(panel)
        self.drawer_scroll.setMinimumWidth(DRAWER_MIN_WIDTH)
        lay.addWidget(self.drawer_scroll, 1)
        self._drawer_overlay = SideOverlay(self.drawer_scroll, lay, page, self.drawer_btn, side="right",
                                           width=DRAWER_OPEN_SIZE)
        self._drawer_auto = True  # follows the window's width until the user chooses
        QShortcut(QKeySequence("F9"), page, activated=self.drawer_btn.click).setWhatsThis("Show or hide the settings drawer")
        if self._source_dock is not None:  # it floats beside the drawer's toggle
            pane = self._source_dock.layout().itemAt(0).widget()
            self._source_overlay = SideOverlay(pane, self._source_dock.layout(), page, self.drawer_btn, side="right",
                                               width=SOURCE_OVERLAY_WIDTH)
        self._show_drawer(True)
        return drawer

    def dock_source(self, pane: QWidget) -> QWidget:
        """The place of a Library source's pane beside the answer column (hidden while it is);
        `pane` says when it is shown or hidden (its `toggled`)."""
        dock = self._source_dock = QWidget()
        lay = QVBoxLayout(dock)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(pane, 1)
        dock.hide()
        pane.toggled.connect(lambda _shown: None if self._fitting_source else self._fit_side_panels())  # type: ignore[attr-defined]
        return dock

    def dock_conversations(self, panel: QWidget) -> QWidget:
        """The conversation list's place in the splitter; a narrow window floats it instead."""
        dock = self._chats_dock = QWidget()
        lay = QVBoxLayout(dock)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(panel, 1)
        self.chats_btn = QToolButton()
        self.chats_btn.setText("\u2630 Chats")
        self.chats_btn.setCheckable(True)
        self.chats_btn.setAutoRaise(True)
        self.chats_btn.setToolTip("Show or hide the conversation list")
        self.chats_btn.clicked.connect(lambda on: self._chats_overlay.set_shown(on))
        self.chats_btn.hide()  # shown while the list floats
        self._chats_overlay = SideOverlay(panel, lay, self._page, self.chats_btn, side="left",
                                          width=CHATS_OVERLAY_WIDTH)
        return dock

    def drawer_clicked(self, on: bool) -> None:
        """The user opened or closed the drawer: it no longer follows the window's width."""
        self._drawer_auto = False
        self._show_drawer(on)

    def _show_drawer(self, on: bool) -> None:
        self.drawer_btn.setChecked(on)
        self.drawer_btn.setText("Settings \u203a" if on else "\u2039 Settings")
        self._drawer_overlay.set_shown(on)
        self._fit_side_panels()
        self._size_drawer()

    def _size_drawer(self) -> None:
        drawer = self._drawer_widget
        on = self.drawer_open and not self._drawer_overlay.floating
        closed_width = self.drawer_btn.sizeHint().width() + 4
        drawer.setMaximumWidth(16777215 if on else closed_width)  # closed or floating: only the toggle
        split = drawer.parentWidget()
        if isinstance(split, QSplitter):  # the transcript gives or takes the drawer's room
            sizes = split.sizes()
            want = max(DRAWER_OPEN_SIZE, sizes[2]) if on else closed_width
            sizes[1] = max(sizes[1] - (want - sizes[2]), 0)
            sizes[2] = want
            split.setSizes(sizes)

    @property
    def drawer_open(self) -> bool:
        return not self.drawer_scroll.isHidden()

    def _fit_side_panels(self) -> None:
        """Dock what fits beside the transcript's minimum, float the rest (see the module's docstring)."""
        if self._chats_overlay is None or self._middle is None:
            return  # still building
        page = self._page
        avail = page.width() - overflow(page) - SLACK
        chats = self._chats_overlay.panel.minimumSizeHint().width()
        middle = self._middle.minimumSizeHint().width()
        toggle = self.drawer_btn.sizeHint().width() + 4
        drawer = DRAWER_MIN_WIDTH + toggle if self.drawer_open else toggle
        handles = 3 * 6 + 24  # splitter handles and the page's margins
        pane = self._source_overlay.panel if self._source_overlay is not None else None
        source = pane.minimumSizeHint().width() + 6 if pane is not None and not pane.isHidden() else 0
        float_source = bool(source) and middle + source + toggle + handles > avail
        middle += 0 if float_source else source
        float_drawer = middle + drawer + handles > avail
        float_chats = chats + middle + (toggle if float_drawer else drawer) + handles > avail
        self._chats_overlay.set_floating(float_chats)
        if float_chats and not self._chats_dock.isHidden():
            self._chats_dock.hide()
        elif not float_chats and self._chats_dock.isHidden():
            self._dock_chats()
        self.chats_btn.setVisible(float_chats)
        if not float_chats:
            self.chats_btn.setChecked(False)
            self._chats_overlay.set_shown(True)
        elif not self.chats_btn.isChecked():
            self._chats_overlay.set_shown(False)
        if float_drawer != self._drawer_overlay.floating:
            self._drawer_overlay.set_floating(float_drawer)
            self._size_drawer()
        if pane is not None:
            self._fit_source(pane, float_source)

    def _fit_source(self, pane: QWidget, floating: bool) -> None:
        """The source's pane docked beside the transcript, or floating over its right edge."""
        shown = not pane.isHidden()
        self._fitting_source = True
        try:
            self._source_overlay.set_floating(floating)
            docking = shown and not floating and self._source_dock.isHidden()
            self._source_dock.setVisible(shown and not floating)
            self._source_overlay.set_shown(shown)
        finally:
            self._fitting_source = False
        split = self._source_dock.parentWidget()
        if docking and isinstance(split, QSplitter) and self._middle is not None:  # as wide as the transcript spares
            total = sum(split.sizes())
            want = min(SOURCE_OVERLAY_WIDTH, max(0, total - self._middle.minimumSizeHint().width() - 6))
            split.setSizes([total - want, want])

    def _dock_chats(self) -> None:
        """The list back in the splitter, as wide as it was (the transcript gives the room)."""
        self._chats_dock.show()
        split = self._chats_dock.parentWidget()
        if isinstance(split, QSplitter):
            sizes = split.sizes()
            want = max(CHATS_DOCK_SIZE, self._chats_dock.minimumSizeHint().width())
            if sizes[0] < want:
                sizes[1] = max(sizes[1] - (want - sizes[0]), 0)
                sizes[0] = want
                split.setSizes(sizes)

    def close_floating_chats(self) -> None:
        """A conversation picked from the floating list: the list makes way for it."""
        if self._chats_overlay.floating and self.chats_btn.isChecked():
            self.chats_btn.setChecked(False)
            self._chats_overlay.set_shown(False)

    def resized(self) -> None:
        """The page was resized: open or close a drawer that follows the window, then dock
        or float each panel."""
        if self._drawer_auto:
            wide = self._page.window().width() >= DRAWER_OPEN_WIDTH
            if wide != self.drawer_open:
                self._show_drawer(wide)
                return
        self._fit_side_panels()
