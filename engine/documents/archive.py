"""The limits a zip-based document (DOCX, XLSX, PPTX, ODS, EPUB) is held to before any reader
parses it, so that a zip bomb is one line in a moment instead of gigabytes of XML.

First from the zip's central directory: its size (read from the end record, before zipfile
builds an entry for each member), the number of members, their declared inflated size and each
large member's compression ratio. Then each member is inflated once through a bounded reader
that stops at its declared size: zipfile trusts the header (a read() inflates all the data there
is, then cuts it), so a header that understates a member would let the parser's read inflate
gigabytes. Inflating 200 MB costs well under a second; parsing it took minutes."""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from ..errors import DocumentError

MB = 1024 * 1024
MAX_MEMBERS = 10_000  # an EPUB of many chapters and images has a few thousand
MAX_DIRECTORY_BYTES = 4 * MB  # the central directory zipfile reads whole: ~40,000 entries
MAX_UNPACKED_BYTES = 200 * MB  # all members inflated: a long book is a few tens of MB of XML
MAX_RATIO = 100  # a member inflating more than this is no document's text...
RATIO_FLOOR = 8 * MB  # ...once it is this large (small repetitive parts are harmless)
# The markup (XML, XHTML) a reader that builds objects per element is given, by kind. Measured on
# a loaded 2-core machine (docs/benchmarks.md, "Document limits"): python-pptx 16 MB of slide XML
# 6.6 s and 340 MB (150 MB: 44 s, 2.6 GB); odfpy's DOM 16 MB of content.xml 13 s and 450 MB;
# openpyxl a 16 MB row 14 s and 450 MB (150 MB: over 90 s); html.parser 8 MB of EPUB markup
# 3.4 s (100 MB: 41 s; 100 MB of paragraphs over 90 s). DOCX streams (wordml.py: its own bounds).
MAX_MARKUP_BYTES = {"PPTX": 16 * MB, "ODS": 8 * MB, "XLSX": 16 * MB, "EPUB": 16 * MB}
MARKUP = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".vml")

_END = b"PK\x05\x06"  # end of central directory record
_END64_LOCATOR = b"PK\x06\x07"
_END64 = b"PK\x06\x06"
_BOMB = "refused as a possible zip bomb"
_CHUNK = 1024 * 1024
_LOCAL_HEADER = 30  # bytes before a member's name and extra field


def directory_size(path: str | Path) -> tuple[int, int] | None:
    """(members, central directory bytes) as the zip's end record declares them (the ZIP64
    record's when there is one); None when there is no end record (zipfile says why)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        start = max(0, size - (22 + 65535))  # the record, then a comment of at most 64 KB
        f.seek(start)
        tail = f.read()
        at = tail.rfind(_END)
        if at < 0 or len(tail) - at < 22:
            return None
        members, cd_bytes = struct.unpack("<xxxxxxxxxxHI", tail[at:at + 16])
        if members != 0xFFFF and cd_bytes != 0xFFFFFFFF:
            return members, cd_bytes
        locator = start + at - 20
        record = locator - 56
        if record < 0:
            return None
        f.seek(record)
        head = f.read(76)
        if head[:4] != _END64 or head[56:60] != _END64_LOCATOR:
            return None
        members64, cd_bytes64 = struct.unpack("<QQ", head[32:48])
        return members64, cd_bytes64


def check_directory(path: str | Path, name: str, kind: str) -> None:
    """Refuse a zip whose central directory is too large to read, before zipfile reads it (it
    builds an entry for every member: 64 MB of empty members is seconds and a gigabyte)."""
    declared = directory_size(path)
    if declared is None:
        return
    members, cd_bytes = declared
    if members > MAX_MEMBERS:
        raise DocumentError(f"{name}: the {kind} file holds {members:,} parts, more than a document does "
                            f"(at most {MAX_MEMBERS:,}): {_BOMB}")
    if cd_bytes > MAX_DIRECTORY_BYTES:
        raise DocumentError(f"{name}: the {kind} file's list of parts is {cd_bytes // 1024:,} KB (at most "
                            f"{MAX_DIRECTORY_BYTES // 1024:,} KB): {_BOMB}")


def check_members(infos: list[zipfile.ZipInfo], name: str, kind: str) -> None:
    """Refuse a zip whose members are too many, inflate too far together, or one of them
    (large) inflates far more than any document's XML compresses; then one whose XML is more
    than its kind's reader gets through in seconds (MAX_MARKUP_BYTES)."""
    if len(infos) > MAX_MEMBERS:
        raise DocumentError(f"{name}: the {kind} file holds {len(infos):,} parts, more than a document does "
                            f"(at most {MAX_MEMBERS:,}): {_BOMB}")
    total = sum(i.file_size for i in infos)
    if total > MAX_UNPACKED_BYTES:
        raise DocumentError(f"{name}: the {kind} file inflates to {total // MB:,} MB (at most "
                            f"{MAX_UNPACKED_BYTES // MB:,} MB): {_BOMB}")
    for i in infos:
        ratio = i.file_size // max(1, i.compress_size)
        if i.file_size > RATIO_FLOOR and ratio > MAX_RATIO:
            raise DocumentError(f"{name}: a part of the {kind} file inflates {ratio:,} times, to "
                                f"{i.file_size // MB:,} MB (at most {MAX_RATIO} times): {_BOMB}")
    markup = sum(i.file_size for i in infos if i.filename.lower().endswith(MARKUP))
    cap = MAX_MARKUP_BYTES.get(kind)
    if cap is not None and markup > cap:  # no bomb, but more than its reader gets through in seconds
        raise DocumentError(f"{name}: the {kind} file holds {_mb(markup)} MB of XML, more than Tandem reads "
                            f"(at most {cap // MB} MB for {kind}): split it or save a smaller copy")


def _mb(size: int) -> str:
    return f"{size / MB:,.1f}" if size < 10 * MB else f"{size // MB:,}"


def check_inflated(path: str | Path, infos: list[zipfile.ZipInfo], name: str, kind: str) -> None:
    """Inflate every member in bounded steps and refuse one whose data inflates past its
    declared size (a header that lies), or a method documents do not use."""
    with open(path, "rb") as f:
        for info in infos:
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise DocumentError(f"{name}: a part of the {kind} file is compressed with method "
                                    f"{info.compress_type}, which Office and EPUB files do not use")
            f.seek(info.header_offset)
            local = f.read(_LOCAL_HEADER)
            if len(local) < _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
                raise DocumentError(f"{name}: not a readable {kind} file (a part of it is missing or damaged)")
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            f.seek(name_len + extra_len, 1)
            try:
                size = _inflated_size(f, info)
            except zlib.error:  # damaged data (or encrypted): no reader would get further
                raise DocumentError(f"{name}: not a readable {kind} file (a part of it is damaged or encrypted)") \
                    from None
            if size > info.file_size:
                raise DocumentError(f"{name}: a part of the {kind} file inflates past the size its header "
                                    f"declares ({info.file_size:,} bytes): {_BOMB}")


def _inflated_size(f: BinaryIO, info: zipfile.ZipInfo) -> int:
    """How far the member's data inflates, counted a chunk at a time and stopping just past its
    declared size (so a lying header costs at most one chunk more than it declares)."""
    left, out = info.compress_size, 0
    inflate = zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
    while left > 0 and out <= info.file_size:
        data = f.read(min(left, _CHUNK))
        if not data:
            break
        left -= len(data)
        if inflate is None:
            out += len(data)
            continue
        while data and out <= info.file_size:
            out += len(inflate.decompress(data, _CHUNK))
            data = inflate.unconsumed_tail
    return out
