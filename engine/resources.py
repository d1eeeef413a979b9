"""Where Tandem's shipped data files are: the catalog (models.toml) and the prompt suites.

People edit them at the repository's top level (models.toml, assets/suites/), so a checkout
reads those files directly. An installed wheel has no repository: setup.py's build step
copies them into the package as engine/data/, found here with importlib.resources.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .errors import TandemError

_REPO = Path(__file__).resolve().parent.parent


def checkout_root() -> Path | None:
    """The repository root when this engine/ runs from a checkout, else None (installed)."""
    if (_REPO / "pyproject.toml").is_file() and (_REPO / "models.toml").is_file():
        return _REPO
    return None


def package_data() -> Path:
    """engine/data/ of an installed package (a real folder: wheels install unzipped)."""
    folder = resources.files(__package__).joinpath("data")
    if not isinstance(folder, Path):
        raise TandemError(f"Tandem's data files are not in a folder ({folder}): install the wheel with pip")
    return folder


def catalog_path() -> Path:
    """models.toml: the checkout's own, else the copy shipped in the package."""
    root = checkout_root()
    return root / "models.toml" if root else package_data() / "models.toml"


def suites_dir() -> Path:
    """The built-in prompt suites (with their subfolders): assets/suites/ of the checkout,
    else the copy shipped in the package."""
    root = checkout_root()
    return root / "assets" / "suites" if root else package_data() / "suites"
