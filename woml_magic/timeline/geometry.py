"""The timeline's sizes, in SVG user units (CSS px), shared by the layout and the SVG
(spec §6.3).

The track is ``TRACK_W`` wide: the whole run fits, with ``LABEL_W`` for the step
column, in under 1000 px, so nothing needs scrolling; the SVG is wider only when a
label beside the last bar needs it (at most ``LABEL_SLACK``). Text widths are estimated
at ``CHAR_W`` px a character (``text_width``), never measured: the layout runs without
a browser.
"""

from __future__ import annotations

LABEL_W = 150.0  # the step column left of the track
TRACK_W = 780.0  # the time axis of a finished run: LABEL_W + TRACK_W + RIGHT_PAD < 1000
RIGHT_PAD = 16.0
AXIS_H = 30.0  # tick labels above the first lane
BAR_H = 20.0
ROW_H = 14.0  # one label row above or below the bars
LANE_GAP = 14.0  # between lanes
FONT_SIZE = 11
CHAR_W = 6.4  # px per character at font-size 11 (a safe over-estimate for sans-serif)
LABEL_GAP = 4.0  # the least space between two labels
BAR_GAP = 2.0  # the least space between a label and a bar other than its own
LABEL_SLACK = 60.0  # how far right of the track a label may reach (the SVG widens)
INSIDE_PAD = 4.0  # text inset inside a bar
MIN_BAR_W = 3.0
BAR_CLEARANCE = 1.0  # a widened bar stops this far before the next attempt
BREAK_W = 56.0
TICK_MIN_PX = 64.0  # the least distance between two ticks
MAX_ROWS_ABOVE = 3
MAX_ROWS_BELOW = 2


def text_width(text: str) -> float:
    """The estimated width of ``text`` at ``FONT_SIZE`` (an over-estimate)."""
    return len(text) * CHAR_W
