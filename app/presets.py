"""Named presets of the chat's sampling settings, max tokens and system prompt ("Report writer",
"Code reviewer", and the user's own): one choice instead of a dozen controls for the kinds of
work people come back to. Built-in ones ship here; a person's own are kept in presets.json
in Tandem's data folder (a preset saved under a built-in's name replaces it for them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.paths import data_dir

from .sampling_fields import DEFAULTS

# What a preset sets: the sampling (temperature, top-k, top-p, min-p, repeat penalty, stop strings,
# seed), max tokens and the system prompt; drafting stays as it is. A setting a preset lacks (a
# built-in's, or one saved before the setting existed) takes its default when it is chosen.
KEYS = (*DEFAULTS, "system")

BUILT_IN: dict[str, dict[str, Any]] = {
    "Report writer": {
        "temperature": 0.3, "top_p": 0.95, "max_tokens": 1500,
        "system": "You are a careful analyst writing a report. Use Markdown headings, short paragraphs and "
                  "tables where they help. Base every statement on the attached documents and say when "
                  "they do not answer something.",
    },
    "Code reviewer": {
        "temperature": 0.0, "top_p": 1.0, "max_tokens": 1000,
        "system": "You review code. List real bugs first, then risks, then style, each with the line it "
                  "concerns and a concrete fix. Be brief; do not restate the code.",
    },
    "Plain chat": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 512, "system": ""},
}


def presets_file() -> Path:
    return data_dir() / "presets.json"


def _own(path: Path) -> dict[str, dict[str, Any]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none saved yet, or a damaged file: the built-in ones still work
    if not isinstance(raw, dict):
        return {}
    return {str(k): {key: v[key] for key in KEYS if key in v} for k, v in raw.items() if isinstance(v, dict)}


def load_presets(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every preset by name: the built-in ones, then the user's own (which win on a name)."""
    return {**BUILT_IN, **_own(path or presets_file())}


def save_preset(name: str, settings: dict[str, Any], path: Path | None = None) -> None:
    """Keep `settings` (their KEYS) as the user's preset `name`; OSError when it cannot be written."""
    path = path or presets_file()
    own = _own(path)
    own[name] = {k: settings[k] for k in KEYS if k in settings}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(own, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
