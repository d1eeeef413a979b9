"""Documents in: the text of the files a person attaches to a prompt (PDF with a text layer,
DOCX, XLSX/ODS as Markdown tables, PPTX, HTML, EPUB, RTF and plain text), read the same way
for the app (Attach, drop, paste) and for `tandem generate --attach`.

A document is a list of sections (pages, sheets, slides, chapters, headings or parts of a
text file), so that one larger than the context can be attached in part. A file without
text (an image, a scanned PDF) is refused in one line that names it and says why.

Pictures for a model that sees (images.py) are checked here too, as untrusted bytes: size,
format signature (PNG, JPEG, WebP) and pixel count before Pillow decodes them to RGB; a
scanned PDF's pages become such pictures through PDFium (pdf_images.py, the `vision` extra).

The readers (pypdf, openpyxl, python-pptx, odfpy, striprtf) are the optional extra `docs`,
imported only when a file of their kind is read; DOCX is read with the standard library's expat
(wordml.py; python-docx stays in the extra for the app's Word export). This room may import only
engine's helpers (errors, paths, units); engine.decoding reads prompt files through its
text decoder.
"""

from .blocks import attachment_block, fence_for
from .model import Document, Section, markdown_table
from .reader import MAX_DOCUMENT_BYTES, MAX_TEXT_BYTES, SUPPORTED, read_document, read_documents
from .text import decode

__all__ = ["Document", "Section", "markdown_table", "read_document", "read_documents", "decode",
           "attachment_block", "fence_for", "SUPPORTED", "MAX_TEXT_BYTES", "MAX_DOCUMENT_BYTES"]
