"""Read a GGUF file's header (metadata and tensor table) from any byte stream.

Why not `gguf.GGUFReader`: it memory-maps the whole file and builds tensor views, so it
cannot read a truncated file (which we want to *diagnose*) nor a header fetched over HTTP
range requests (the remote compatibility check). This reader only walks the header, using
the `gguf` package's own type constants and block sizes.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from ..errors import ModelFileError
from ..units import human_bytes

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

_SCALAR_FORMATS = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}

# Sanity bounds so a corrupt length field fails fast instead of allocating gigabytes.
_MAX_STRING = 64 * 1024 * 1024
_MAX_ARRAY = 64 * 1024 * 1024
_MAX_KV = 1_000_000
_MAX_TENSORS = 10_000_000
# Arrays of arrays: real models nest one level at most (llama.cpp itself reads none); a
# corrupt or hostile header nesting 100,000 deep must not exhaust Python's stack.
MAX_ARRAY_DEPTH = 16


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the start of the data section

    @property
    def nbytes(self) -> int:
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(self.ggml_type)]
        except (ValueError, KeyError):
            raise ModelFileError(f"unknown tensor type {self.ggml_type} for tensor {self.name!r}") from None
        n = 1
        for d in self.shape:
            n *= d
        return n // block * type_size


@dataclass
class GGUFHeader:
    """Metadata key/values and tensor table of one GGUF file."""

    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo] = field(default_factory=list)
    data_offset: int = 0  # absolute offset of the tensor data section

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    def arch_value(self, suffix: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{suffix}", default)

    @property
    def mtp_layers(self) -> int:
        """Multi-token-prediction (nextn) layers the file carries: its own draft head (Qwen3.5/3.6,
        GLM-4.5+, DeepSeek). 0 when it has none."""
        n = self.arch_value("nextn_predict_layers", 0)
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0

    @property
    def split_count(self) -> int:
        return int(self.metadata.get("split.count", 1) or 1)

    @property
    def data_size(self) -> int:
        """Bytes the tensor data section needs (end of the last tensor)."""
        return max((t.offset + t.nbytes for t in self.tensors), default=0)

    @property
    def expected_file_size(self) -> int:
        return self.data_offset + self.data_size


@dataclass(frozen=True)
class SkippedArray:
    """An array value not read (`read_header(..., arrays=False)`): only its length is known."""

    count: int

    def __len__(self) -> int:
        return self.count


class _Stream:
    """Sequential reader with a position counter over a `read(n)` callable, refilled `chunk` bytes
    at a time: a 151,936-token vocabulary is 300,000 small reads, which cost 0.4 s one call each."""

    def __init__(self, read: Callable[[int], bytes], source: str, arrays: bool = True, chunk: int = 1 << 20):
        self._read = read
        self._buf = b""
        self._off = 0  # the next unread byte of _buf
        self._eof = False
        self.chunk = chunk
        self.pos = 0  # bytes consumed from the stream's start
        self.source = source
        self.arrays = arrays  # False: arrays (a tokenizer's 150k strings) are stepped over, not decoded

    def _fill(self, n: int) -> None:
        """At least `n` unread bytes in the buffer, or all the stream has left."""
        have = len(self._buf) - self._off
        while have < n and not self._eof:
            want = max(n - have, self.chunk)
            more = self._read(want)
            self._eof = len(more) < want
            self._buf = self._buf[self._off:] + more
            self._off = 0
            have = len(self._buf)

    def _short(self, n: int) -> ModelFileError:
        return ModelFileError(
            f"{self.source}: file ends inside the GGUF header at byte {self.pos + len(self._buf) - self._off} "
            "(truncated or still downloading)"
        )

    def read(self, n: int) -> bytes:
        if len(self._buf) - self._off < n:
            self._fill(n)
            if len(self._buf) - self._off < n:
                raise self._short(n)
        data = self._buf[self._off:self._off + n]
        self._off += n
        self.pos += n
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > _MAX_STRING:
            raise ModelFileError(f"{self.source}: corrupt GGUF header (string of {n} bytes at {self.pos})")
        return self.read(n).decode("utf-8", errors="replace")

    def strings(self, count: int, keep: bool) -> list[str] | None:
        """`count` strings in one loop over the buffer (a vocabulary's tokens or merges); `keep`
        False: stepped over, not decoded. Locals only in the loop: it runs 300,000 times."""
        out: list[str] = []
        add = out.append
        length = _U64.unpack_from
        buf, off, start = self._buf, self._off, self._off
        size = len(buf)
        for _ in range(count):
            if size - off < 8:
                buf, off, start, size = self._refill(off, start, 8)
            (n,) = length(buf, off)
            if n > _MAX_STRING:
                self._off, self.pos = off, self.pos + off - start
                raise ModelFileError(f"{self.source}: corrupt GGUF header (string of {n} bytes at {self.pos + 8})")
            off += 8
            end = off + n
            if end > size:
                buf, off, start, size = self._refill(off - 8, start, 8 + n)
                off += 8
                end = off + n
            if keep:
                add(buf[off:end].decode("utf-8", errors="replace"))
            off = end
        self._off, self.pos = off, self.pos + off - start
        return out if keep else None

    def _refill(self, off: int, start: int, n: int) -> tuple[bytes, int, int, int]:
        """`strings`' loop state after making `n` bytes from `off` available (or raising)."""
        self._off, self.pos = off, self.pos + off - start
        self._fill(n)
        if len(self._buf) - self._off < n:
            raise self._short(n)
        return self._buf, self._off, self._off, len(self._buf)


_U64 = struct.Struct("<Q")


def _read_value(s: _Stream, vtype: int, depth: int = 0) -> Any:
    try:
        vt = GGUFValueType(vtype)
    except ValueError:
        raise ModelFileError(f"{s.source}: corrupt GGUF header (unknown value type {vtype} at {s.pos})") from None
    if vt == GGUFValueType.STRING:
        return s.string()
    if vt == GGUFValueType.ARRAY:
        if depth >= MAX_ARRAY_DEPTH:
            raise ModelFileError(f"{s.source}: corrupt GGUF header (arrays nested more than {MAX_ARRAY_DEPTH} deep "
                                 f"at byte {s.pos})")
        item_type = s.unpack("<I")
        count = s.unpack("<Q")
        if count > _MAX_ARRAY:
            raise ModelFileError(f"{s.source}: corrupt GGUF header (array of {count} items)")
        if item_type in _SCALAR_FORMATS:
            fmt = _SCALAR_FORMATS[GGUFValueType(item_type)]
            size = struct.calcsize(fmt)
            raw = s.read(size * count)
            return list(struct.unpack(f"<{count}{fmt[1]}", raw)) if s.arrays else SkippedArray(count)
        if item_type == GGUFValueType.STRING:
            strings = s.strings(count, keep=s.arrays)
            return SkippedArray(count) if strings is None else strings
        items = [_read_value(s, item_type, depth + 1) for _ in range(count)]
        return items if s.arrays else SkippedArray(count)
    return s.unpack(_SCALAR_FORMATS[vt])


def read_header_stream(read: Callable[[int], bytes], source: str, *, with_tensors: bool = True,
                       arrays: bool = True, chunk: int = 1 << 20) -> GGUFHeader:
    """Parse a GGUF header from a `read(n)` callable (file, HTTP range reader...).

    `arrays=False`: array values become `SkippedArray`s (a model's scalars in a tenth of the
    time: most of a header is the tokenizer's vocabulary). `chunk`: bytes asked of `read` at a time
    (a remote reader asks for less: what it reads ahead is fetched)."""
    s = _Stream(read, source, arrays, chunk)
    s._fill(4)
    magic = s._buf[:4]
    if len(magic) < 4:
        raise ModelFileError(f"{source}: not a GGUF file (only {len(magic)} bytes)")
    s.read(4)
    if magic != GGUF_MAGIC:
        raise ModelFileError(f"{source}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
    version = s.unpack("<I")
    if version not in (2, 3):
        raise ModelFileError(f"{source}: unsupported GGUF version {version}")
    n_tensors = s.unpack("<Q")
    n_kv = s.unpack("<Q")
    if n_kv > _MAX_KV or n_tensors > _MAX_TENSORS:
        raise ModelFileError(f"{source}: corrupt GGUF header ({n_kv} keys, {n_tensors} tensors)")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = s.string()
        vtype = s.unpack("<I")
        metadata[key] = _read_value(s, vtype)
    header = GGUFHeader(version=version, metadata=metadata)
    if not with_tensors:
        return header
    for _ in range(n_tensors):
        name = s.string()
        n_dims = s.unpack("<I")
        if n_dims > 8:
            raise ModelFileError(f"{source}: corrupt GGUF tensor table ({n_dims} dims for {name!r})")
        shape = tuple(s.unpack("<Q") for _ in range(n_dims))
        ggml_type = s.unpack("<I")
        offset = s.unpack("<Q")
        header.tensors.append(TensorInfo(name, shape, ggml_type, offset))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT) or DEFAULT_ALIGNMENT)
    header.data_offset = (s.pos + alignment - 1) // alignment * alignment
    return header


def read_header(path: str | os.PathLike[str], *, with_tensors: bool = True, arrays: bool = True) -> GGUFHeader:
    """Parse a local file's header; errors name the file and the cause. `arrays=False`: see
    `read_header_stream`."""
    p = Path(path)
    size = _regular_file_size(p)
    if size == 0:
        raise ModelFileError(f"{p}: file is empty")
    try:
        with open(p, "rb", buffering=1 << 20) as f:
            return read_header_stream(f.read, str(p), with_tensors=with_tensors, arrays=arrays)
    except PermissionError as e:
        raise ModelFileError(f"{p}: cannot read ({e.strerror})") from None


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def _regular_file_size(p: Path) -> int:
    """The size of `p`, or a ModelFileError naming the true cause: missing, a dangling or
    looping symbolic link, a folder, a FIFO or device (whose reads would block or never end)."""
    try:
        st = p.stat()
    except FileNotFoundError:
        if p.is_symlink():
            raise ModelFileError(f"{p}: is a symbolic link to {os.readlink(p)}, which does not exist") from None
        raise ModelFileError(f"{p}: no such file") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ModelFileError(f"{p}: is a symbolic link loop (it leads back to itself)") from None
        raise ModelFileError(f"{p}: cannot read ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelFileError(f"{p}: is a directory, expected a .gguf file")
    for test, kind in _KINDS:
        if test(st.st_mode):
            raise ModelFileError(f"{p}: is {kind}, not a file: give the path of a .gguf file")
    return st.st_size


def validate_file(path: str | os.PathLike[str]) -> GGUFHeader:
    """Header plus a size check: the file must hold every tensor's bytes.

    Catches the common failure of a partial download before llama.cpp sees the file.
    Split models (`-00001-of-0000N.gguf`) are checked part by part.
    """
    p = Path(path)
    header = read_header(p)
    actual = p.stat().st_size
    try:
        expected = header.expected_file_size
    except ModelFileError as e:  # an unknown tensor type: say which file
        raise ModelFileError(f"{p}: {e}") from None
    if header.tensors and actual < expected:
        raise ModelFileError(
            f"{p}: truncated GGUF: {actual:,} bytes on disk, tensors need {expected:,} "
            f"({(expected - actual):,} missing)"
        )
    return header


# -- describing a header to a person ----------------------------------------------------------
def _quant(file_type: object) -> str | None:
    if not isinstance(file_type, int):
        return None
    try:
        import gguf

        name = gguf.LlamaFileType(file_type).name
    except (ImportError, ValueError):
        return f"file type {file_type}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def _count(n: float) -> str:
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return str(int(n))


def describe(header: GGUFHeader, size: int | None = None) -> list[tuple[str, str]]:
    """(label, value) rows a person wants to see about a GGUF, from its header alone.

    One description for `tandem import`/`check` and the app's import panel.
    """
    md = header.metadata
    rows: list[tuple[str, str]] = [("architecture", header.architecture)]
    if md.get("general.name"):
        rows.append(("name", str(md["general.name"])))
    params = None
    if header.tensors:
        total = 0
        for t in header.tensors:
            n = 1
            for d in t.shape:
                n *= d
            total += n
        params = _count(total)
    label = md.get("general.size_label")
    if params or label:
        rows.append(("parameters", " / ".join(str(x) for x in (params, label) if x)))
    ctx = header.arch_value("context_length")
    if ctx is not None:
        rows.append(("context length", f"{int(ctx):,}"))
    tokens = md.get("tokenizer.ggml.tokens")
    vocab = f"{len(tokens):,}" if isinstance(tokens, list) else "none in the header"
    rows.append(("vocabulary", f"{vocab} ({md.get('tokenizer.ggml.model', 'unknown')})"))
    q = _quant(md.get("general.file_type"))
    if q:
        rows.append(("quantization", q))
    if size is not None:
        rows.append(("file size", f"{human_bytes(size)} ({size:,} bytes)"))
    rows.append(("chat template", "yes" if md.get("tokenizer.chat_template") else "no"))
    if header.split_count > 1:
        rows.append(("split", f"{header.split_count} files"))
    return rows
