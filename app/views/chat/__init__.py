"""The Chat page in parts: its layout, the settings drawer, the conversation list, the
composer (attachments, meter, export), answering, and per-message actions; page.py
assembles them."""

from .format import stats_text
from .page import ChatView

__all__ = ["ChatView", "stats_text"]
