"""Qt's offscreen platform with a screen of a chosen size. Its own screen is 800x800, smaller
than the windows the tests open and than the screens people have, and the app sizes its
first window from its screen; the offscreen plugin reads its screens from a JSON file named
in the platform string (`offscreen:configfile=PATH`). tests/conftest.py gives every test
process TEST_SCREEN (offscreen_screen.json beside this file, a common 1920x1080 desktop)."""

from __future__ import annotations

import json
from pathlib import Path

TEST_SCREEN = Path(__file__).with_name("offscreen_screen.json")


def screen_config(folder: Path, width: int, height: int) -> Path:
    """Write a config for one screen of width x height logical pixels at 96 dpi; its path."""
    path = folder / f"offscreen-screen-{width}x{height}.json"
    screen = {"name": f"offscreen-{width}x{height}", "x": 0, "y": 0, "width": width, "height": height,
              "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}
    path.write_text(json.dumps({"screens": [screen]}))
    return path


def platform(config: Path = TEST_SCREEN) -> str:
    """The QT_QPA_PLATFORM value for the offscreen platform with the screens in `config`."""
    return f"offscreen:configfile={config}"
