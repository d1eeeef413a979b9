"""The suffix drafter's history file on disk: one int32 NumPy array (`np.save`, no pickle).

Read without `np.load`: the size is checked before a byte is read and the header (magic,
dtype, shape) before the data, so a 6 GB or damaged file costs a stat and a few hundred bytes,
not a whole read, and never ends in NumPy's pickle advice. Only the newest tokens the store
keeps are read. A file that is not a history is set aside as `<name>.damaged` (the user's data
stays recoverable; the next answer starts a new file).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ...units import human_bytes

# No store Tandem makes writes more tokens than this (the default keeps 262,144): a larger
# file is not a history, and is refused before anything in it is read.
MAX_FILE_TOKENS = 1 << 26  # 256 MiB of int32
_MAX_HEADER = 64 * 1024  # np.save writes headers of ~128 bytes; NumPy's own bound is 10,000
MAX_FILE_BYTES = MAX_FILE_TOKENS * 4 + _MAX_HEADER
DAMAGED_SUFFIX = ".damaged"


class DamagedHistory(ValueError):
    """The file is not a token history (too large, not NumPy, another dtype or shape, cut short,
    tokens outside the vocabulary). The message says which, in a few words."""


def read_tail(path: Path, keep: int) -> tuple[np.ndarray, bool]:
    """The last `keep` tokens of the history at `path`, and whether older ones were left
    unread. OSError when the file cannot be opened; DamagedHistory when it is not a history."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise DamagedHistory(f"{human_bytes(size)}: a draft history is at most {human_bytes(MAX_FILE_BYTES)}")
    with open(path, "rb") as f:
        n = _array_length(f)
        start = f.tell()
        if start + 4 * n != size:
            raise DamagedHistory(f"{human_bytes(size)} on disk where its header says {human_bytes(start + 4 * n)}")
        keep = min(n, max(0, keep))
        f.seek(start + 4 * (n - keep))
        data = f.read(4 * keep)
    if len(data) != 4 * keep:
        raise DamagedHistory("cut short while reading")
    return np.frombuffer(data, dtype=np.int32), keep < n


def _array_length(f) -> int:
    """Check the header of the .npy file `f` is a 1-D int32 array's; its length. Leaves `f` at the data."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
    except (ValueError, EOFError) as e:  # NumPy's own wording goes to no one
        raise DamagedHistory("not a NumPy array file") from e
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    if version not in readers:
        raise DamagedHistory(f"NumPy file format {version[0]}.{version[1]}, not one np.save writes here")
    try:
        shape, _, dtype = readers[version](f, max_header_size=_MAX_HEADER)
    except (ValueError, EOFError, SyntaxError, TypeError) as e:
        raise DamagedHistory("its NumPy header is unreadable") from e
    if dtype != np.dtype(np.int32) or len(shape) != 1:
        raise DamagedHistory(f"a {dtype} array of shape {shape}, not a 1-D int32 token list")
    return int(shape[0])


def damaged_path(path: Path) -> Path:
    """Where a history that could not be used is kept for the user."""
    return path.with_name(path.name + DAMAGED_SUFFIX)


def set_aside(path: Path) -> Path:
    """Move the unusable history out of the way (replacing an older one set aside); OSError if it cannot."""
    aside = damaged_path(path)
    os.replace(path, aside)
    return aside
