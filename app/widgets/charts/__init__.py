"""Figures drawn from a run: the live charts (pyqtgraph), the race's speed bars, the
streaming stats line and the prompt-reading progress.

May import controls/, app's core modules (theme) and engine/; never the other widget
families, history, views or main_window.
"""
