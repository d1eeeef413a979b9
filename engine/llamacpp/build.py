"""How the installed llama-cpp-python was built: by Tandem's set-up script or otherwise.

packaging/install_llama_cpp.sh leaves its build key beside the package; a llama_cpp without
it came from elsewhere (a plain pip wheel can crash on AMX CPUs), which `tandem doctor` says.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


def built_by_tandem() -> bool:
    """True when Tandem's set-up built the installed llama_cpp. Imports it (so loads libllama):
    an ImportError says llama.cpp is missing or broken."""
    import llama_cpp

    return (Path(llama_cpp.__file__).parent / ".tandem_build_key").exists()


@lru_cache(maxsize=1)
def build_id() -> str:
    """The installed llama.cpp build, in a few characters: a KV state saved by one build is
    not loaded by another (its layout may differ). The package version, Tandem's build key
    when it made it, and libllama's size (a rebuild of the same version changes it)."""
    import llama_cpp

    pkg = Path(llama_cpp.__file__).parent
    key = pkg / ".tandem_build_key"
    lib = next(iter(sorted((pkg / "lib").glob("libllama.*"))), None)
    parts = [llama_cpp.__version__, key.read_text().strip() if key.exists() else "",
             str(lib.stat().st_size) if lib is not None else ""]
    return ":".join(parts)
