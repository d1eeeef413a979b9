"""The first-run banner: the pair that fits this machine, fetched and loaded in one click; while
it downloads, a wide bar (percent and speed), the status line and Cancel. When an earlier
download of that pair stopped part-way, the offer says how much is on disk and the button
reads "Resume download", as the Models page's button reads Resume."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from engine.models import partial
from engine.models.catalog import PairSpec
from engine.units import human_bytes

from ...downloads.job import DownloadStatus

BANNER_BAR_WIDTH = 280  # room for "100% · 12.3 MB/s"
DOWNLOAD_TEXT, RESUME_TEXT = "Download and load", "Resume download"


class WelcomeBanner(QWidget):
    """First run without models: one pair offered, its download's progress, and Cancel."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("welcome")
        lay = QHBoxLayout(self)
        left = QVBoxLayout()
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.status = QLabel()  # the download's own line: bytes, speed, ETA; what a cancel kept
        self.status.setObjectName("welcomeStatus")
        self.status.setWordWrap(True)
        self.status.hide()
        left.addWidget(self.text)
        left.addWidget(self.status)
        self.button = QPushButton(DOWNLOAD_TEXT)
        self.cancel = QPushButton("Cancel")
        self.cancel.setToolTip("Stop the download (the status line says what is kept)")
        self.cancel.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMinimumWidth(BANNER_BAR_WIDTH)
        self.progress.hide()
        lay.addLayout(left, 1)
        lay.addWidget(self.progress)
        lay.addWidget(self.cancel)
        lay.addWidget(self.button)

    def offer(self, pair: PairSpec, fit: str, note: str) -> None:
        """Recommend `pair` (`fit`: its verdict on this machine); resume its partial download if one is on disk."""
        try:
            found = partial.pair_partial(pair)
        except OSError:  # an unreadable cache: offer the whole download, as the Models page does
            found = None
        if found is not None and found.resumable:
            size = f"{human_bytes(found.on_disk)} of {human_bytes(pair.bytes)} on disk from an earlier download"
            self.button.setText(RESUME_TEXT)
            self.button.setToolTip(f"Fetch the remaining {human_bytes(pair.bytes - found.on_disk)}, then load the pair")
        else:
            size = f"{pair.bytes / 1e9:.1f} GB download"
            self.button.setText(DOWNLOAD_TEXT)
            self.button.setToolTip(f"Fetch both models ({human_bytes(pair.bytes)}), then load the pair")
        self.text.setText(f"<b>Welcome to Tandem.</b> Recommended for this machine: <b>{pair.title}</b> "
                          f"({size}, {fit}). {note}")
        self.button.setProperty("pair", pair.id)
        self.button.show()

    def show_download(self, st: DownloadStatus) -> None:
        """Any download's progress (the session runs one at a time); the button again after a failure."""
        self.progress.setVisible(st.bar_visible)
        self.progress.setValue(round(1000 * st.fraction))
        speed = f" · {human_bytes(st.bytes_per_s)}/s" if st.bytes_per_s > 0 and not st.ended else ""
        self.progress.setFormat(f"%p%{speed}")
        self.progress.setToolTip(st.bar_format.replace("%p%", f"{st.fraction:.0%}"))
        self.status.setText(st.text)
        self.status.setVisible(bool(st.text))
        self.cancel.setVisible(st.cancellable)
        self.button.setEnabled(st.ended and not st.ok)
