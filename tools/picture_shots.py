"""The chat's pictures for the README, with tools/screenshots.py (`--views pictures`): a model
that sees, a chart attached from a file and a screenshot pasted from the clipboard as chips,
then the question sent with its thumbnail in the transcript, at 1024x700, light and dark.

No model that sees is in the store this script may use (the catalog's projectors come with
their models), so the chat loads the tiny Qwen3.5 the tests use, with its random projector
(`python -m engine.models.tinymodel --arch qwen35 --mtp --mmproj`): the window, the chips and
the thumbnails are the app's own; the answer's words are a random model's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SIZE = (1024, 700)
QUESTION = "What does this chart show, and how does it relate to the error in the screenshot?"


def chart_png(path: Path) -> Path:
    """A bar chart of four quarters, drawn with Qt (what an analyst pastes)."""
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QColor, QFont, QImage, QPainter

    image = QImage(640, 400, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    p = QPainter(image)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    title = QFont()
    title.setPointSize(16)
    title.setBold(True)
    p.setFont(title)
    p.setPen(QColor(40, 40, 40))
    p.drawText(QRectF(0, 12, 640, 30), Qt.AlignmentFlag.AlignCenter, "Sales by quarter (k EUR)")
    body = QFont()
    body.setPointSize(11)
    p.setFont(body)
    p.drawLine(60, 350, 600, 350)
    for i, (label, value) in enumerate((("Q1", 120), ("Q2", 185), ("Q3", 150), ("Q4", 260))):
        x = 90 + i * 130
        h = value * 1.1
        p.fillRect(QRectF(x, 350 - h, 80, h), QColor(56, 132, 244))
        p.drawText(QRectF(x, 352, 80, 24), Qt.AlignmentFlag.AlignCenter, label)
        p.drawText(QRectF(x, 350 - h - 24, 80, 22), Qt.AlignmentFlag.AlignCenter, str(value))
    p.end()
    image.scaled(288, 180, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation).save(
        str(path), "PNG")  # small: the tiny model's context is 2,048 tokens
    return path


def error_dialog():
    """A screenshot of an error dialog, as pixels on the clipboard (what a developer pastes)."""
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QColor, QFont, QImage, QPainter

    image = QImage(420, 160, QImage.Format.Format_RGB32)
    image.fill(QColor(236, 236, 236))
    p = QPainter(image)
    p.fillRect(QRectF(0, 0, 420, 30), QColor(70, 70, 80))
    p.setPen(QColor("white"))
    p.drawText(QRectF(10, 0, 400, 30), Qt.AlignmentFlag.AlignVCenter, "Report export")
    p.setBrush(QColor(210, 60, 50))
    p.setPen(Qt.PenStyle.NoPen)
    p.drawEllipse(QRectF(22, 56, 36, 36))
    p.setPen(QColor("white"))
    big = QFont()
    big.setPointSize(18)
    big.setBold(True)
    p.setFont(big)
    p.drawText(QRectF(22, 56, 36, 36), Qt.AlignmentFlag.AlignCenter, "!")
    p.setPen(QColor(30, 30, 30))
    body = QFont()
    body.setPointSize(11)
    p.setFont(body)
    p.drawText(QRectF(76, 48, 330, 60), Qt.TextFlag.TextWordWrap,
               "Q4 totals could not be exported: connection refused (db-reports:5432)")
    p.drawRect(QRectF(330, 118, 70, 26))
    p.drawText(QRectF(330, 118, 70, 26), Qt.AlignmentFlag.AlignCenter, "OK")
    p.end()
    return image.scaled(300, 114, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)


def seeing_model(folder: Path) -> Path:
    """The tiny Qwen3.5 with an MTP layer and its random projector beside it (found on load)."""
    from engine.models.tiny_archs import write_arch_model
    from engine.models.tiny_projector import write_projector

    folder.mkdir(parents=True, exist_ok=True)
    target = write_arch_model(folder / "tiny-qwen3.5-vl.gguf", "qwen35", mtp=True, seed=0)
    write_projector(folder / "mmproj-tiny-qwen3.5-vl.gguf")
    return target


def picture_shots(shots: Any, win: Any, tmp: Path, themes: list[str]) -> None:
    """In each theme: pictures attached (a chart from a file, a pasted screenshot) as chips
    under the prompt, then the question sent, its pictures as thumbnails above the answer."""
    from PySide6.QtGui import QGuiApplication

    chart = chart_png(tmp / "sales-by-quarter.png")
    target = seeing_model(tmp / "vision")
    chat = win.chat
    win.nav.setCurrentRow(0)
    win.session.load(target, "mtp", label="Tiny Qwen3.5 (test model)", n_ctx=8192)
    shots.wait(lambda: win.session.engine is not None and not win.session.busy)
    ratio = win.devicePixelRatioF()
    win.resize(round(SIZE[0] / ratio), round(SIZE[1] / ratio))
    for theme in themes:
        win.set_theme(theme)
        chat.new_conversation()
        chat.apply_settings({**chat.settings(), "drafter": "mtp", "lookahead": "auto", "temperature": 0.0,
                             "max_tokens": 40})
        chat.attach_files([str(chart)])
        QGuiApplication.clipboard().setImage(error_dialog())
        chat.prompt.setFocus()
        chat.prompt.paste()
        chat.prompt.setPlainText(QUESTION)
        shots.shot(f"pictures-attached-{theme}", from_screen=True)
        chat.send()
        shots.wait(lambda: chat.worker is None)
        chat.transcript.jump_to_latest()
        shots.shot(f"pictures-sent-{theme}", from_screen=True)
