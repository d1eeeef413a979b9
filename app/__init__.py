"""Tandem's desktop app (PySide6): one consumer of the engine's event stream among several.

Rooms, each importing only downward: history/ (the conversations in SQLite), the core at
this level (workers and their keeper, theme, replay, ...), downloads/ (one pair's download),
session.py (the loaded engine, owning the download), widgets/ (reusable pieces in families;
may import the rooms below), views/ (one per page, side by side; may import widgets and
below), then main_window.py and main.py (the entry point registered as `tandem.gui`).
app/ imports engine/, never llama_cpp and never tools/; engine/ never imports app.
"""
