"""Bytes to text for prompts and attached text files: a byte-order mark picks UTF-8/16/32
(and is dropped), else UTF-8. The CLI's prompt files and the attachments share it."""

from __future__ import annotations

import codecs

# Longest BOM first: the UTF-32 LE BOM starts with the UTF-16 LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode(data: bytes) -> tuple[str, int]:
    """Text from bytes: a BOM picks UTF-8/16/32, else UTF-8; bad sequences become U+FFFD
    and are counted (U+FFFD that was really there is not)."""
    encoding = "utf-8"
    for bom, enc in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom):], enc
            break
    try:
        return data.decode(encoding), 0
    except UnicodeDecodeError:
        text = data.decode(encoding, "replace")
    genuine = data.decode(encoding, "ignore").count("\ufffd")
    return text, text.count("\ufffd") - genuine
