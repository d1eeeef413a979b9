"""The light/dark choice: follow the system, or force one (Settings → Appearance).

Qt 6.8+ can ask the platform theme for a scheme (`QStyleHints.setColorScheme`); platforms
without a theme (offscreen, a bare X server) ignore it, so a forced scheme also sets the
Fusion style with a matching palette, and "System" restores the style and palette the
application started with.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleFactory

SCHEMES = ("system", "light", "dark")
_original: tuple[str, QPalette] | None = None  # the style name and palette before any override
_forced: str = "system"


def dark_palette() -> QPalette:
    """A dark palette for Fusion (the usual values of Qt's own dark themes)."""
    p = QPalette()
    window, base, text = QColor(45, 45, 48), QColor(30, 31, 34), QColor(220, 220, 220)
    for role, c in ((QPalette.ColorRole.Window, window), (QPalette.ColorRole.WindowText, text),
                    (QPalette.ColorRole.Base, base), (QPalette.ColorRole.AlternateBase, window),
                    (QPalette.ColorRole.ToolTipBase, base), (QPalette.ColorRole.ToolTipText, text),
                    (QPalette.ColorRole.Text, text), (QPalette.ColorRole.Button, window),
                    (QPalette.ColorRole.ButtonText, text), (QPalette.ColorRole.Highlight, QColor(46, 125, 50)),
                    (QPalette.ColorRole.HighlightedText, QColor(255, 255, 255)),
                    (QPalette.ColorRole.PlaceholderText, QColor(140, 140, 140)),
                    (QPalette.ColorRole.Mid, QColor(120, 120, 120)), (QPalette.ColorRole.Link, QColor(100, 160, 255))):
        p.setColor(role, c)
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(120, 120, 120))
    return p


CONTROL_EDGE = QColor(160, 160, 160)  # outlines of boxes and handles on the dark palette: 4.7:1 on its window
FOCUS_RING = QColor(120, 180, 255)  # the keyboard focus on the dark palette: 6:1 on its window (Fusion's was ~1.3:1)
_FOCUSABLE_FRAMES = (QStyle.PrimitiveElement.PE_FrameLineEdit, QStyle.PrimitiveElement.PE_PanelButtonCommand,
                     QStyle.PrimitiveElement.PE_PanelButtonTool)


class ContrastStyle(QProxyStyle):
    """Fusion, with the edges a dark palette loses drawn in a colour that stands out.

    Fusion outlines a check box and a slider handle in a shade of the window colour; on a
    dark window that is all but invisible (an unchecked box vanished; the slider's handle
    at 0 blended into the groove). Checked against a contrast ratio in the tests."""

    def drawPrimitive(self, element, option, painter, widget=None) -> None:  # noqa: N802
        if element == QStyle.PrimitiveElement.PE_FrameFocusRect:  # Fusion draws it in a dark green: all but gone
            self._focus_ring(option.rect, painter)
            return
        super().drawPrimitive(element, option, painter, widget)
        if element in _FOCUSABLE_FRAMES and option.state & QStyle.StateFlag.State_HasFocus:
            self._focus_ring(option.rect, painter)
        if element in (QStyle.PrimitiveElement.PE_IndicatorCheckBox, QStyle.PrimitiveElement.PE_IndicatorItemViewItemCheck):
            painter.save()
            painter.setPen(CONTROL_EDGE)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(option.rect.adjusted(0, 0, -1, -1), 2, 2)
            painter.restore()

    @staticmethod
    def _focus_ring(rect, painter) -> None:
        painter.save()
        pen = QPen(FOCUS_RING)
        pen.setWidth(2)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(rect.adjusted(1, 1, -1, -1), 3, 3)
        painter.restore()

    def drawComplexControl(self, control, option, painter, widget=None) -> None:  # noqa: N802
        super().drawComplexControl(control, option, painter, widget)
        if control == QStyle.ComplexControl.CC_Slider:
            handle = self.subControlRect(control, option, QStyle.SubControl.SC_SliderHandle, widget)
            painter.save()
            painter.setPen(CONTROL_EDGE)
            painter.setBrush(CONTROL_EDGE.darker(150))
            painter.drawRoundedRect(handle.adjusted(1, 1, -2, -2), 3, 3)
            painter.restore()


_dark_style: QStyle | None = None  # held here: the application does not keep a Python reference


def forced() -> str:
    """The scheme the user chose: "system", "light" or "dark"."""
    return _forced


def apply(app: QApplication, scheme: str) -> None:
    """Follow the system ("system") or force "light"/"dark", at once, for every open window."""
    global _original, _forced
    if scheme not in SCHEMES:
        scheme = "system"
    if _original is None:
        _original = (app.style().name(), QPalette(app.palette()))
    _forced = scheme
    hints = app.styleHints()
    if scheme == "system":
        if hasattr(hints, "unsetColorScheme"):
            hints.unsetColorScheme()
        app.setStyle(_original[0])
        app.setPalette(_original[1])
        return
    if hasattr(hints, "setColorScheme"):
        hints.setColorScheme(Qt.ColorScheme.Dark if scheme == "dark" else Qt.ColorScheme.Light)
    global _dark_style
    if scheme == "dark":
        _dark_style = ContrastStyle(QStyleFactory.create("Fusion"))
        app.setStyle(_dark_style)
        app.setPalette(dark_palette())
    else:
        app.setStyle("Fusion")
        app.setPalette(app.style().standardPalette())


def is_dark(app: QApplication) -> bool:
    """Whether the app is drawn dark now: the forced scheme, else the system's, else the palette."""
    if _forced != "system":
        return _forced == "dark"
    scheme = app.styleHints().colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return app.palette().window().color().lightness() < 128
