"""Every colour the app draws with, in one place: token provenance, good/warning/bad
verdicts, the two race sides, chart pens and backgrounds, for light and dark palettes.

Plain strings and RGB(A) tuples, no Qt: pyqtgraph takes the tuples as they are, Qt style
sheets take the hex strings, and widgets build a QColor from either where they need one.
"""

from __future__ import annotations

from dataclasses import dataclass

RGB = tuple[int, int, int]
RGBA = tuple[int, int, int, int]

# The hues the app is built on (also the race sides and the chart pens).
GREEN: RGB = (46, 160, 67)
BLUE: RGB = (56, 132, 244)
ORANGE: RGB = (240, 136, 62)
GREY: RGB = (120, 120, 120)
PURPLE: RGB = (171, 71, 188)
TEAL: RGB = (0, 150, 136)
RED: RGB = (200, 60, 60)

# Where each token came from; translucent so they read on light and dark palettes alike.
PROVENANCE: dict[str, RGBA] = {
    "draft": (*GREEN, 90),  # accepted draft tokens
    "bonus": (*BLUE, 90),  # the bonus token after a full acceptance
    "target": (*ORANGE, 100),  # the target's correction after a rejection
    "plain": (0, 0, 0, 0),  # target alone: no background
}

# The two sides of a race: target alone pays for every token, target + draft saves some.
RACE_SIDES: dict[str, RGB] = {"target": ORANGE, "speculative": GREEN}

# The empty track behind a bar (any palette).
TRACK: RGBA = (128, 128, 128, 40)

# Series colours of charts with several lines (bench: one per mode).
SERIES: list[RGB] = [GREEN, BLUE, ORANGE, PURPLE, TEAL, RED]

# Chart pens of the live generation charts.
CHART_ACCEPTANCE: RGB = GREEN
CHART_CUMULATIVE: RGB = GREY
CHART_SPEED: RGB = BLUE
CHART_LOOKAHEAD: RGB = ORANGE
CHART_HISTOGRAM: RGBA = (*GREEN, 160)


@dataclass(frozen=True)
class Palette:
    """Text colours for verdicts and chart surfaces, for one light/dark scheme."""

    good: str  # a speedup, compatible, ready, fits
    warn: str  # slower, partial, near a limit
    bad: str  # incompatible, does not fit, failed
    near_tie: str  # outputs parted at a near-tie of the target's own logits
    accent: str  # the selected page in the navigation
    chart_bg: str
    chart_fg: str
    gain: str  # a bench speedup >= 1 in a table cell
    loss: str  # a bench speedup < 1 in a table cell


LIGHT = Palette(good="#2e7d32", warn="#e65100", bad="#c62828", near_tie="#ef6c00", accent="#2e7d32",
                chart_bg="#ffffff", chart_fg="#303030", gain="#2e8c3c", loss="#c84632")
DARK = Palette(good="#66bb6a", warn="#ffa726", bad="#ef5350", near_tie="#ef6c00", accent="#66bb6a",
               chart_bg="#1e1f22", chart_fg="#d0d0d0", gain="#2e8c3c", loss="#c84632")

# Tints of the accent for the navigation and the first-run banner (style-sheet rgba()).
ACCENT_TINT = "rgba(46,125,50,0.15)"
BANNER_TINT = "rgba(46,125,50,0.12)"
BANNER_BORDER = "rgba(46,125,50,0.4)"


def palette(dark: bool) -> Palette:
    """The palette for the current scheme."""
    return DARK if dark else LIGHT


def css_rgba(rgba: RGBA) -> str:
    """A style-sheet colour from an RGBA tuple: rgba(r,g,b,alpha 0..1)."""
    r, g, b, a = rgba
    return f"rgba({r},{g},{b},{a / 255:.2f})"
