"""Build step: compile the row kernels, and ship the catalog and the prompt suites inside the
`engine` package.

engine/decoding/sampling/_row_kernels.c is the sampler's one-pass work over a logits row (see its
header); it is plain C with no dependency but Python's headers, built by the compiler that
builds llama.cpp. The catalog and the suites live at the repository's top level (models.toml, assets/suites/), where people edit
them; an installed wheel has no repository, so build_py copies them into engine/data/.
engine/resources.py looks in the checkout first, then in engine/data/. Everything else about
the package is declared in pyproject.toml.
"""

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGE_DATA = {"models.toml": "models.toml", "assets/suites": "suites"}  # source -> engine/data/<name>


def data_files() -> list[tuple[Path, str]]:
    """(source file, its path under engine/data/) for every shipped file, subfolders included."""
    missing = [src for src in PACKAGE_DATA if not (ROOT / src).exists()]
    if missing:
        raise SystemExit(f"setup.py: {', '.join(missing)} missing from {ROOT} (an sdist built without MANIFEST.in?)")
    out = []
    for src, dest in PACKAGE_DATA.items():
        path = ROOT / src
        if path.is_file():
            out.append((path, dest))
            continue
        for f in sorted(path.rglob("*")):
            if f.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in f.relative_to(path).parts):
                out.append((f, f"{dest}/{f.relative_to(path).as_posix()}"))
    return out


class BuildPyWithData(build_py):
    """build_py that also copies the top-level data files into build_lib/engine/data/."""

    def _targets(self) -> list[tuple[Path, Path]]:
        base = Path(self.build_lib) / "engine" / "data"
        return [(src, base / rel) for src, rel in data_files()]

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout itself
            return
        for src, dst in self._targets():
            self.mkpath(str(dst.parent))
            self.copy_file(str(src), str(dst))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        extra = [] if getattr(self, "editable_mode", False) else [str(d) for _, d in self._targets()]
        return super().get_outputs(include_bytecode) + extra


class BuildExtOptimised(build_ext):
    """build_ext with the row kernels' flags: -O3 so loops vectorise, -fno-trapping-math so
    the compiler may compute both sides of a select (no FP exceptions are read anywhere)."""

    def build_extensions(self) -> None:
        flags = ["/O2"] if self.compiler.compiler_type == "msvc" else ["-O3", "-fno-trapping-math"]
        for ext in self.extensions:
            ext.extra_compile_args = flags + list(ext.extra_compile_args or [])
        super().build_extensions()


ROW_KERNELS = Extension("engine.decoding.sampling._row_kernels", ["engine/decoding/sampling/_row_kernels.c"])

setup(cmdclass={"build_py": BuildPyWithData, "build_ext": BuildExtOptimised}, ext_modules=[ROW_KERNELS])
