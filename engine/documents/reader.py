"""Which reader a file needs (by its first bytes, then its name), the limits, and the one-line
refusals: an image, a scanned PDF, an old binary Office file, a locked PDF, a reader that is
not installed, a file that is no text at all, a file whose name claims a document format its
content is not, a zip bomb (archive.py, checked before any parser sees the file)."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path
from typing import Callable

from ..errors import DocumentError, DocumentErrors
from .archive import check_directory, check_inflated, check_members
from .blocks import visible_name
from .markup import epub_chapters, html_to_markdown, rtf_to_text
from .model import Document, Refused, Section, check_length, line_parts, markdown_sections
from .text import decode

MAX_TEXT_BYTES = 512 * 1024  # a text file: more is not a prompt, and would freeze the tokenizer call
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # a PDF or Office file (its text is far smaller)
SUPPORTED = "PDF, DOCX, XLSX, ODS, PPTX, HTML, EPUB, RTF or a text file"
EXTENSIONS = ("pdf", "docx", "xlsx", "xlsm", "ods", "pptx", "html", "htm", "xhtml", "epub", "rtf",
              "txt", "md", "markdown", "csv", "tsv", "json", "py", "rst", "log", "xml", "yaml", "yml", "toml")

_IMAGES = ((b"\x89PNG", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"GIF8", "GIF"), (b"BM", "BMP"),
           (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"))
_IMAGE_NAMES = {"png": "PNG", "jpg": "JPEG", "jpeg": "JPEG", "gif": "GIF", "bmp": "BMP", "tif": "TIFF",
                "tiff": "TIFF", "webp": "WebP", "heic": "HEIC", "svg": "SVG"}
_ZIP_KINDS = {"docx": "DOCX", "xlsx": "XLSX", "xlsm": "XLSX", "pptx": "PPTX", "ods": "ODS", "epub": "EPUB"}
# A name claiming one of these promises its signature: without it the file is refused as that
# kind (a text file named .pptx is no slides), never read as text under a document's name.
_SIGNED = {**_ZIP_KINDS, "pdf": "PDF", "rtf": "RTF"}
_SIGNATURE = {"PDF": "it does not start as every PDF does, with %PDF-",
              "RTF": "it does not start as every RTF file does, with {\\rtf"}
_NEEDS = {"PDF": "pypdf", "XLSX": "openpyxl", "ODS": "odfpy", "PPTX": "python-pptx",
          "RTF": "striprtf"}


def _kind(name: str, head: bytes, path: Path) -> str:
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if head.startswith(b"%PDF-") or (ext == "pdf" and b"%PDF-" in head):  # PDF allows bytes before its header
        return "PDF"
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(name, ext, path)
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        return "OLE"
    if head.startswith(b"{\\rtf"):
        return "RTF"
    for magic, what in _IMAGES:
        if head.startswith(magic):
            return "image " + what
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image WebP"
    if ext in _IMAGE_NAMES and ext != "svg":
        return "image " + _IMAGE_NAMES[ext]
    if ext in _SIGNED:
        kind = _SIGNED[ext]
        raise DocumentError(f"{name}: not a readable {kind} file ("
                            f"{_SIGNATURE.get(kind, f'it is not a zip archive, as every {kind} file is')})")
    if ext in ("html", "htm", "xhtml") or head.lstrip()[:15].lower() in (b"<!doctype html>",) \
            or head.lstrip()[:5].lower() == b"<html":
        return "HTML"
    return "text"


def _zip_kind(name: str, ext: str, path: Path) -> str:
    """The document kind a zip holds, by its parts; a bomb refused before any of it is read.
    A damaged zip says which kind its name claims (its reader then says what is wrong)."""
    claimed = _ZIP_KINDS.get(ext, "zip")
    try:
        check_directory(path, name, claimed)
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            names = {i.filename for i in infos}
            mimetype = ""
            if "mimetype" in names:
                with z.open("mimetype") as f:
                    mimetype = f.read(100).decode("ascii", "replace").strip()
    except DocumentError:
        raise
    except Exception:  # noqa: BLE001 - BadZipFile, an unsupported compression, a truncated file
        return claimed
    kind = ("DOCX" if "word/document.xml" in names else "XLSX" if "xl/workbook.xml" in names
            else "PPTX" if "ppt/presentation.xml" in names else "EPUB" if mimetype == "application/epub+zip"
            else "ODS" if mimetype == "application/vnd.oasis.opendocument.spreadsheet" else "zip")
    if kind != "zip":
        check_members(infos, name, kind)
        check_inflated(path, infos, name, kind)
    return kind


def read_document(path: str | Path, name: str | None = None) -> Document:
    """The text of the file at `path`, or DocumentError in one line that starts with its name."""
    p = Path(path)
    name = visible_name(name or p.name)  # it starts every line below, and goes into prompts
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise DocumentError(f"{name}: is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):  # a pipe or a device would block or never end
            raise DocumentError(f"{name}: not a regular file")
        with p.open("rb") as f:
            head = f.read(1024)
    except OSError as e:
        raise DocumentError(f"{name}: cannot read ({e.strerror})") from None
    kind = _kind(name, head, p)
    limit = MAX_TEXT_BYTES if kind in ("text", "HTML") else MAX_DOCUMENT_BYTES
    if st.st_size > limit:  # said before reading: a dropped disk image must not fill memory
        raise DocumentError(f"{name}: {st.st_size // 1024:,} KB is too large to attach (at most {limit // 1024:,} KB"
                            f"{' for a text file' if limit == MAX_TEXT_BYTES else ''})")
    if kind.startswith("image"):
        raise DocumentError(f"{name}: a {kind[6:]} image has no text to read (Tandem's models read text; "
                            "no OCR): paste its text instead")
    if kind == "OLE":
        raise DocumentError(f"{name}: an old binary Office file (.doc/.xls/.ppt); save it as .docx, .xlsx or .pptx")
    if kind == "zip":
        raise DocumentError(f"{name}: a zip archive, not a document (supported: {SUPPORTED})")
    try:
        doc = _read(kind, p, name)
        check_length(len(doc.text))
    except DocumentError:
        raise
    except Refused as e:
        raise DocumentError(f"{name}: {e}") from None
    except ImportError:
        raise DocumentError(f"{name}: reading {kind} needs {_NEEDS.get(kind, 'the docs extra')} "
                            "(pip install 'tandem-studio[docs]')") from None
    except OSError as e:
        raise DocumentError(f"{name}: cannot read ({e.strerror or e})") from None
    except Exception as e:  # noqa: BLE001 - a damaged file is the user's input, said in one line
        detail = visible_name(" ".join(str(e).split())[:120]) or type(e).__name__
        raise DocumentError(f"{name}: not a readable {kind} file ({detail})") from None
    return doc


class NoTextLayer(DocumentError):
    """A PDF without a text layer: nothing to read as text, but its pages are pictures a model
    that sees can read (pdf_images.py)."""


def _read(kind: str, p: Path, name: str) -> Document:
    if kind == "text":
        text, undecodable = decode(p.read_bytes())
        if undecodable:
            raise DocumentError(f"{name}: not a UTF-8 text file (nor UTF-16/32 with a byte-order mark) "
                                f"and not a document Tandem reads ({SUPPORTED})")
        markdown = name.lower().endswith((".md", ".markdown"))
        sections = markdown_sections(text) if markdown else line_parts(text)
        return Document(name, "text", tuple(sections), "section" if markdown else "part", whole=text)
    if kind == "PDF":
        from .pdf import pdf_pages

        pages, locked = pdf_pages(str(p))
        if locked:
            raise DocumentError(f"{name}: the PDF is password-protected; save an unlocked copy")
        if not any(s.text for s in pages):
            raise NoTextLayer(f"{name}: no text layer in its {len(pages)} page(s) (a scanned or image-only PDF); "
                                "run OCR on it first, or send its pages as pictures to a model that sees")
        return Document(name, kind, tuple(pages), "page")
    readers: dict[str, tuple[Callable[[str], list[Section]], str]] = {
        "DOCX": (_lazy("docx_sections"), "section"), "XLSX": (_lazy("xlsx_sheets"), "sheet"),
        "ODS": (_lazy("ods_sheets"), "sheet"), "PPTX": (_lazy("pptx_slides"), "slide"),
        "EPUB": (epub_chapters, "chapter"),
    }
    if kind in readers:
        read, unit = readers[kind]
        sections = read(str(p))
    elif kind == "HTML":
        text, _ = decode(p.read_bytes())
        sections = markdown_sections(html_to_markdown(text)[1])
        unit = "section"
    else:  # RTF: plain text once its markup is gone
        text = rtf_to_text(p.read_bytes()).strip()
        if not text:
            raise DocumentError(f"{name}: the RTF file has no text in it")
        return Document(name, kind, tuple(line_parts(text)), "part", whole=text)
    sections = [s for s in sections if s.text.strip()]
    if not sections:
        raise DocumentError(f"{name}: the {kind} file has no text in it")
    return Document(name, kind, tuple(sections), unit)


def _lazy(reader: str) -> Callable[[str], list[Section]]:
    def read(path: str) -> list[Section]:
        from . import office

        return getattr(office, reader)(path)

    return read


def read_documents(paths: list[str | Path]) -> list[Document]:
    """Every file's document, or one DocumentErrors naming each file that was refused."""
    docs, errors = [], []
    for path in paths:
        try:
            docs.append(read_document(path))
        except DocumentError as e:
            errors.append(e)
    if errors:
        raise errors[0] if len(errors) == 1 else DocumentErrors(errors)
    return docs
