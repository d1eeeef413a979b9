"""A GGUF whose metadata nests arrays 100,000 deep is refused with one ModelFileError line by
every entry point that reads a header (import, check: local and remote, generate, serve),
instead of a RecursionError and thousands of traceback lines; shallow nesting still reads."""

from __future__ import annotations

import io
import socket
import struct
from pathlib import Path

import pytest

from engine.cli.main import main as cli
from engine.errors import ModelFileError
from engine.models.gguf_header import MAX_ARRAY_DEPTH, read_header, read_header_stream
from fakehub import fakehub  # noqa: F401  (fixture)

ARRAY, UINT32 = 9, 4


def nested_gguf(path: Path, depth: int) -> Path:
    """A GGUF v3 header with one key whose value is an array of an array of ... (`depth`
    levels) of no uint32."""
    key = b"general.nested"
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
    out += struct.pack("<Q", len(key)) + key + struct.pack("<I", ARRAY)
    out += struct.pack("<IQ", ARRAY, 1) * (depth - 1)
    out += struct.pack("<IQ", UINT32, 0)
    path.write_bytes(bytes(out))
    return path


@pytest.fixture
def deep(tmp_path) -> Path:
    return nested_gguf(tmp_path / "deep.gguf", 100_000)


def _one_line(capsys, rc: int) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "nested more than" in err[0] and "deep.gguf" in err[0], err
    return err[0]


def test_the_reader_bounds_the_depth_and_reads_shallow_nesting(deep, tmp_path):
    with pytest.raises(ModelFileError, match=rf"deep.gguf: corrupt GGUF header \(arrays nested more than {MAX_ARRAY_DEPTH} deep"):
        read_header(deep)
    with pytest.raises(ModelFileError):  # the step-over mode (arrays=False) too
        read_header(deep, arrays=False)
    ok = nested_gguf(tmp_path / "ok.gguf", MAX_ARRAY_DEPTH)
    value = read_header(ok, with_tensors=False).metadata["general.nested"]
    for _ in range(MAX_ARRAY_DEPTH - 1):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    assert value == []
    with pytest.raises(ModelFileError):
        read_header(nested_gguf(tmp_path / "one-more.gguf", MAX_ARRAY_DEPTH + 1))


def test_a_stream_reader_as_the_remote_check_uses_is_bounded_too(deep):
    with pytest.raises(ModelFileError, match="org/repo/deep.gguf: corrupt GGUF header"):
        read_header_stream(io.BytesIO(deep.read_bytes()).read, "org/repo/deep.gguf", with_tensors=False)


def test_import_says_it_in_one_line(deep, capsys):
    _one_line(capsys, cli(["import", str(deep)]))


def test_check_local_says_it_in_one_line(deep, tiny_draft, capsys):
    _one_line(capsys, cli(["check", str(deep), str(tiny_draft)]))


def test_check_remote_reads_the_header_and_says_it_in_one_line(fakehub, deep, tiny_draft, capsys):  # noqa: F811
    fakehub.add("org/repo", "deep.gguf", deep)
    _one_line(capsys, cli(["check", "org/repo/deep.gguf", str(tiny_draft)]))


def test_generate_says_it_in_one_line(deep, capsys):
    _one_line(capsys, cli(["generate", "hello", "--target", str(deep), "--max-tokens", "2"]))


def test_serve_says_it_in_one_line_before_listening(deep, capsys):
    pytest.importorskip("fastapi")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    _one_line(capsys, cli(["serve", "--target", str(deep), "--port", str(port)]))
