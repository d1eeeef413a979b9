"""Prompt text from a command-line argument, a file or stdin, read tolerantly.

Prompts arrive as bytes we do not control: files saved in another encoding, shell
arguments holding bytes that are not UTF-8 (Python hands those over as lone surrogates,
which the tokenizer cannot encode). Undecodable input is replaced with U+FFFD and
counted, so the caller can say so on stderr; the only refusals are unreadable files and
files too large to be a prompt (which also keeps `@/dev/zero` from reading forever).
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...errors import PromptError

MAX_PROMPT_BYTES = 64 * 1024 * 1024  # far beyond any context window (about 16M tokens)

# Longest BOM first: the UTF-32 LE BOM starts with the UTF-16 LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True)
class PromptText:
    text: str
    replaced: int  # places where undecodable input became U+FFFD
    source: str  # "argument", "stdin" or the file's path

    def warning(self) -> str | None:
        """One line for stderr when something was replaced, else None."""
        if not self.replaced:
            return None
        return f"{self.source}: {self.replaced} undecodable byte sequence(s) replaced with U+FFFD"


def decode(data: bytes) -> tuple[str, int]:
    """Text from bytes: a BOM picks UTF-8/16/32, else UTF-8; bad sequences become U+FFFD."""
    encoding = "utf-8"
    for bom, enc in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom):], enc
            break
    try:
        return data.decode(encoding), 0
    except UnicodeDecodeError:
        text = data.decode(encoding, "replace")
    genuine = data.decode(encoding, "ignore").count("\ufffd")  # U+FFFD that was really there
    return text, text.count("\ufffd") - genuine


def clean(value: str) -> tuple[str, int]:
    """A str that UTF-8 can encode: lone surrogates (argv bytes that were not UTF-8,
    or a stray surrogate from an API caller) become U+FFFD."""
    try:
        value.encode("utf-8")
        return value, 0
    except UnicodeEncodeError:
        pass
    try:
        data = os.fsencode(value)  # surrogate escapes back to the bytes the shell passed
    except UnicodeEncodeError:
        data = value.encode("utf-8", "surrogatepass")
    return decode(data)


def _read_bounded(f: BinaryIO, what: str) -> bytes:
    data = f.read(MAX_PROMPT_BYTES + 1)
    if len(data) > MAX_PROMPT_BYTES:
        raise PromptError(f"{what}: more than {MAX_PROMPT_BYTES // (1024 * 1024)} MiB; that is not a prompt")
    return data


def read_prompt(value: str, stdin: BinaryIO | None = None) -> PromptText:
    """`value` as given, '-' for stdin (bytes), '@FILE' for a file's contents."""
    if value == "-":
        if stdin is None:
            raise PromptError("stdin is closed: nothing to read the prompt from")
        text, n = decode(_read_bounded(stdin, "stdin"))
        return PromptText(text, n, "stdin")
    if value.startswith("@"):
        path = Path(value[1:])
        shown, _ = clean(str(path))
        try:
            with open(path, "rb") as f:
                data = _read_bounded(f, shown)
        except OSError as e:
            raise PromptError(f"{shown}: cannot read prompt file ({e.strerror or e})") from None
        except ValueError as e:  # an embedded NUL in the path
            raise PromptError(f"{shown!r}: cannot read prompt file ({e})") from None
        text, n = decode(data)
        return PromptText(text, n, shown)
    text, n = clean(value)
    return PromptText(text, n, "argument")
