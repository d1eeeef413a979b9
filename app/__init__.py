"""Tandem's desktop app (PySide6): one consumer of the engine's event stream among several.

Rooms, each importing only downward: the core at this level (session, workers and their
keeper, download controller, history, theme, replay), widgets/ (reusable pieces; may import
the core), views/ (one per page; may import widgets and the core), then main_window.py and
main.py (the entry point registered as `tandem.gui`). app/ imports engine/, never
llama_cpp and never tools/; engine/ never imports app.
"""
