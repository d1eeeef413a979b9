"""Where Tandem keeps its own files (not the models: those live in the HF cache)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "tandem"


def data_dir() -> Path:
    """User data: metrics log, conversation history. TANDEM_HOME overrides (tests, portable installs)."""
    home = os.environ.get("TANDEM_HOME")
    return Path(home) if home else Path(platformdirs.user_data_dir(APP, appauthor=False))


def metrics_log() -> Path:
    env = os.environ.get("TANDEM_METRICS_LOG")
    return Path(env) if env else data_dir() / "metrics.jsonl"


def history_db() -> Path:
    return data_dir() / "history.sqlite3"


def draft_history_dir() -> Path:
    """Where the suffix drafter keeps past answers (token ids), one file per target."""
    return data_dir() / "draft-history"


def draft_history(model_id: str) -> Path:
    """The suffix drafter's past answers for one target (`model_id`: its name and size)."""
    return draft_history_dir() / f"{safe_name(model_id)}.npy"


def prompt_cache_dir() -> Path:
    """Where read prompts' KV states are kept across restarts, one folder per target file."""
    return data_dir() / "prompt-cache"


def library_dir() -> Path:
    """Where the folder indexes of `tandem ask` and the app's Library are kept (one SQLite file each)."""
    return data_dir() / "library"


def safe_name(name: str) -> str:
    """`name` as one file or folder name on any system (a model id holds ':')."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
