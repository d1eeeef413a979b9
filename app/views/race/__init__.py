"""The Race page in parts: layout.py builds the widgets (RaceParts); page.py runs the race and
owns the components that fill them: Verdict (verdict.py: the result box) and Replay
(replaying.py: the synchronised replay of both runs).

May import widgets/, app's core modules (replay, session, workers, theme) and engine/; never
another page, main_window or main."""

from .page import RaceView

__all__ = ["RaceView"]
