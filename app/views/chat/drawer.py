"""The chat's settings drawer: the generation settings and live charts at the right, closed
in a narrow window so the transcript keeps its room (F9 opens and closes it)."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QScrollArea, QSplitter, QToolButton, QVBoxLayout, QWidget

DRAWER_OPEN_WIDTH = 1100  # the settings drawer starts closed in a narrower window
DRAWER_MIN_WIDTH = 240  # the drawer scrolls rather than widening the window
DRAWER_OPEN_SIZE = 380  # its width when opened


class DrawerMixin:
    """ChatView's drawer behaviour (the panel inside it is built in layout.py)."""

    def _drawer(self, panel: QWidget) -> QWidget:
        """The settings and charts in a drawer that a narrow window keeps closed.

        The panel scrolls inside it, so it never sets the window's minimum width; the
        toggle stays visible when it is closed. Until the user opens or closes it, it
        follows the window: open from DRAWER_OPEN_WIDTH px, closed below.
        """
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
        self.drawer_btn.clicked.connect(self._drawer_clicked)
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
        self._drawer_auto = True  # follows the window's width until the user chooses
        QShortcut(QKeySequence("F9"), self, activated=self.drawer_btn.click).setWhatsThis("Show or hide the settings drawer")
        self._show_drawer(True)
        return drawer

    def _drawer_clicked(self, on: bool) -> None:
        self._drawer_auto = False
        self._show_drawer(on)

    def _show_drawer(self, on: bool) -> None:
        self.drawer_btn.setChecked(on)
        self.drawer_btn.setText("Settings \u203a" if on else "\u2039 Settings")
        self.drawer_scroll.setVisible(on)
        drawer = self._drawer_widget
        closed_width = self.drawer_btn.sizeHint().width() + 4
        drawer.setMaximumWidth(16777215 if on else closed_width)  # closed: only the toggle
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

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        if self._drawer_auto:
            wide = self.window().width() >= DRAWER_OPEN_WIDTH
            if wide != self.drawer_open:
                self._show_drawer(wide)

    def set_charts_visible(self, on: bool) -> None:
        """Show or hide the live charts (the checkbox, or the GUI benchmark)."""
        if self.charts_toggle.isChecked() != on:
            self.charts_toggle.setChecked(on)  # comes back here through `toggled`
            return
        self.charts.setVisible(on)

