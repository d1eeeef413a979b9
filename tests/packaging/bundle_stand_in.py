"""A stand-in for the PyInstaller bundle: the layout the installers package (an executable that
echoes its arguments, one file under _internal/), built in milliseconds instead of minutes."""

from __future__ import annotations

from pathlib import Path


def stand_in_bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle" / "tandem"
    (bundle / "_internal").mkdir(parents=True)
    (bundle / "_internal" / "lib.txt").write_text("a bundled library\n")
    exe = bundle / "tandem"
    exe.write_text('#!/bin/sh\necho "bundle args: $*"\n')
    exe.chmod(0o755)
    return bundle
