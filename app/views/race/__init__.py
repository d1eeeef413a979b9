"""The Race page in parts: its layout, the verdict (result box), the synchronised replay;
page.py assembles them."""

from .page import RaceView

__all__ = ["RaceView"]
