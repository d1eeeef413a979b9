"""A download from Hugging Face that cannot reach it: offer the catalog's PyPI mirror in the
same dialog as the error, instead of a raw "ConnectError" and a hunt for the Source box."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from engine.models.catalog import PairSpec

# What an unreachable Hub looks like in an error line (httpx / huggingface_hub wordings).
UNREACHABLE = ("ConnectError", "ConnectTimeout", "Errno -2", "Errno -3", "Name or service not known",
               "Temporary failure in name resolution", "Connection refused", "Network is unreachable",
               "unreachable", "offline")


def hub_unreachable(message: str) -> bool:
    return any(s.lower() in message.lower() for s in UNREACHABLE)


def has_mirror(pair: PairSpec) -> bool:
    """Every file of the pair can come from the mirror."""
    files = [f for m in (pair.target, pair.draft) for f in m.files]
    return bool(files) and all(f.mirrors for f in files)


def offer_mirror(parent: QWidget, pair: PairSpec, message: str) -> bool:
    """Ask whether to fetch `pair` from the mirror; True when the user says yes."""
    first = message.strip().splitlines()[0] if message.strip() else message
    answer = QMessageBox.question(
        parent, "Download",
        f"Hugging Face cannot be reached from this machine ({first[:160]}).\n\n"
        f"{pair.title} is also published on PyPI: download it from the mirror instead? "
        "Every file is checked against the same sha256.",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes)
    return answer == QMessageBox.StandardButton.Yes
