"""PDF pages through pypdf, within bounds: at most MAX_PDF_PAGES pages and PDF_SECONDS of
reading (checked between pages), stopping once the text passes MAX_TEXT_CHARS. pypdf's own
log lines and warnings are kept quiet while it reads, so that a damaged PDF is said once, in
the reader's one line, and not first in pypdf's words."""

from __future__ import annotations

import logging
import threading
import time
import warnings
from contextlib import contextmanager
from typing import Iterator

from .model import Refused, Section, check_length

MAX_PDF_PAGES = 2000  # a long book; a PDF with more is split before it is a prompt
PDF_SECONDS = 60.0  # reading the text of every page; a PDF that takes longer is refused

_pypdf_log = logging.getLogger("pypdf")  # every pypdf module logs under it
_quiet_lock = threading.Lock()
_quiet_readers = 0
_saved_level = logging.NOTSET


@contextmanager
def quiet_pypdf() -> Iterator[None]:
    """pypdf's log lines off while any thread reads a PDF (the app reads on worker threads)."""
    global _quiet_readers, _saved_level
    with _quiet_lock:
        if _quiet_readers == 0:
            _saved_level = _pypdf_log.level
            _pypdf_log.setLevel(logging.CRITICAL + 1)
        _quiet_readers += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_readers -= 1
            if _quiet_readers == 0:
                _pypdf_log.setLevel(_saved_level)


def pdf_pages(path: str) -> tuple[list[Section], bool]:
    """(pages, encrypted-and-locked). A page without a text layer has empty text."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadWarning

    warnings.filterwarnings("ignore", category=PdfReadWarning)  # said in our line, if it matters
    with quiet_pypdf():
        reader = PdfReader(path)
        if reader.is_encrypted:
            try:
                if not reader.decrypt(""):
                    return [], True
            except Exception:  # noqa: BLE001 - an unsupported cipher is locked to us too
                return [], True
        count = len(reader.pages)
        if count > MAX_PDF_PAGES:
            raise Refused(f"{count:,} pages is more than Tandem reads (at most {MAX_PDF_PAGES:,}): "
                          "split the PDF and attach a part")
        deadline = time.monotonic() + PDF_SECONDS
        pages, chars = [], 0
        for n in range(count):
            if n and time.monotonic() > deadline:
                raise Refused(f"reading its text took over {PDF_SECONDS:.0f} s (stopped at page {n + 1} of "
                              f"{count:,}): split the PDF and attach a part")
            text = (reader.pages[n].extract_text() or "").strip()
            chars += len(text)
            check_length(chars)
            pages.append(Section(f"Page {n + 1}", text))
        return pages, False
