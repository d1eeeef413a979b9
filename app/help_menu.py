"""The Help menu's contents: every keyboard shortcut the window really has (collected from
its QShortcut and QAction objects, so the list cannot go stale) and the About text."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDialog, QDialogButtonBox, QHeaderView, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget,
)


@dataclass(frozen=True)
class ShortcutInfo:
    keys: str  # as the platform writes it ("Ctrl+N")
    what: str  # what it does
    where: str  # the page it works on, or "Everywhere"


def _where(obj: QShortcut | QAction, window: QWidget, pages: dict[QWidget, str]) -> str:
    w = obj.parent()
    while isinstance(w, QWidget) and w is not window:
        if w in pages:
            return pages[w]
        w = w.parentWidget()
    return "Everywhere"


def _describe(obj: QShortcut | QAction) -> str:
    if isinstance(obj, QAction):
        return obj.text().replace("&", "")
    return obj.whatsThis() or "(no description)"


def collect_shortcuts(window: QWidget, pages: dict[QWidget, str] | None = None) -> list[ShortcutInfo]:
    """Every enabled shortcut of `window` and its children: key, description, page; sorted, no repeats."""
    pages = pages or {}
    seen: set[tuple[str, str]] = set()
    out: list[ShortcutInfo] = []
    objs: list[QShortcut | QAction] = [*window.findChildren(QShortcut), *window.findChildren(QAction)]
    for obj in objs:
        keys = [obj.key()] if isinstance(obj, QShortcut) else list(obj.shortcuts())
        for k in keys:
            text = k.toString(QKeySequence.SequenceFormat.NativeText)
            if not text or not obj.isEnabled():
                continue
            info = ShortcutInfo(text, _describe(obj), _where(obj, window, pages))
            if (info.keys, info.where) in seen:
                continue
            seen.add((info.keys, info.where))
            out.append(info)
    return sorted(out, key=lambda s: (s.where != "Everywhere", s.where, s.keys))


class ShortcutsDialog(QDialog):
    """A table of the collected shortcuts."""

    def __init__(self, shortcuts: list[ShortcutInfo], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        lay = QVBoxLayout(self)
        self.table = QTableWidget(len(shortcuts), 3)
        self.table.setHorizontalHeaderLabels(["Keys", "Action", "Where"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for r, s in enumerate(shortcuts):
            for c, v in enumerate((s.keys, s.what, s.where)):
                self.table.setItem(r, c, QTableWidgetItem(v))
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.resizeColumnsToContents()
        lay.addWidget(self.table)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(520, 380)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def about_html(backend: str) -> str:
    """Version (the installed package, else the source tree's), backend and the llama.cpp binding."""
    import engine

    version = _version("tandem-studio") or f"{engine.__version__} (source tree)"
    llama = _version("llama_cpp_python") or "not installed"
    from PySide6 import __version__ as pyside

    return (f"<h3>Tandem {version}</h3><p>Local speculative decoding over llama.cpp: a small draft "
            f"model proposes tokens, the target verifies them in one pass.</p>"
            f"<p>Backend: {backend}<br>llama.cpp: llama-cpp-python {llama}<br>Qt: PySide6 {pyside}</p>"
            "<p>More: <code>tandem doctor</code> checks the installation.</p>")
