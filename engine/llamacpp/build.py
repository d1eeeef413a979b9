"""How the installed llama-cpp-python was built: by Tandem's set-up script or otherwise.

packaging/install_llama_cpp.sh leaves its build key beside the package; a llama_cpp without
it came from elsewhere (a plain pip wheel can crash on AMX CPUs), which `tandem doctor` says.
"""

from __future__ import annotations

from pathlib import Path


def built_by_tandem() -> bool:
    """True when Tandem's set-up built the installed llama_cpp. Imports it (so loads libllama):
    an ImportError says llama.cpp is missing or broken."""
    import llama_cpp

    return (Path(llama_cpp.__file__).parent / ".tandem_build_key").exists()
