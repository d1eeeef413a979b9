"""The Chat page in parts: page.py builds the widgets (layout.py, drawer.py) and owns the
objects that act on them: asking.py (Send, Edit, Regenerate, Continue), answering.py (the
answer being written and saved) and settings_panel.py (generation settings, live charts);
conversations.py and composer.py hold the page's conversation list and composer."""

from .format import stats_text
from .page import ChatView

__all__ = ["ChatView", "stats_text"]
