"""The timeline's sizes, in SVG user units (CSS px), shared by the layout and the SVG
(spec §6.3).

The track is ``TRACK_W`` wide: the whole run fits, with ``LABEL_W`` for the step
column, in under 1000 px, so nothing needs scrolling; the SVG is wider only when a
label beside the last bar needs it (at most ``LABEL_SLACK``). Text widths are estimated
(``text_width``), never measured: the layout runs without a browser. The estimate sums
DejaVu Sans's advance widths, the widest of the fonts ``system-ui, sans-serif`` becomes
(Linux's; Segoe UI, San Francisco, Helvetica and Arial are narrower), so a box drawn
from it holds the real text; a character it does not list counts one em.
"""

from __future__ import annotations

LABEL_W = 150.0  # the step column left of the track
TRACK_W = 780.0  # the time axis of a finished run: LABEL_W + TRACK_W + RIGHT_PAD < 1000
RIGHT_PAD = 16.0
AXIS_H = 38.0  # tick labels, then resume and now marks' words, above the first lane
TICK_BASELINE = 18.0  # tick and axis-break labels (12 px: 6.9–20.8)
MARK_BASELINE = AXIS_H - 3  # a mark's word (12 px: 23.9–37.8), clear of both
BAR_H = 20.0
ROW_H = 16.0  # one label row above or below the bars (12 px text is 14 px high)
LANE_GAP = 14.0  # between lanes
BAND_H = 24.0  # a comparison's row with a run's label, above its lanes (12 px text)
FONT_SIZE = 12  # every text of the drawing: at least 12 px at 100 % zoom (spec §6.3)
BOLD = 1.15  # how much wider bold text is, at most (DejaVu Sans Bold: 1.13)
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


# Advance widths in em, measured in Chromium (DejaVu Sans Book, no kerning), grouped
# by width: the characters of the timeline's labels, ticks, legend and step column.
_EM_GROUPS: dict[float, str] = {
    0.275: "'",
    0.278: "ijl",
    0.295: "IJ",
    0.318: " ,.·",
    0.337: "/:;\\|",
    0.352: "f",
    0.361: "-",
    0.390: "()[]⟨⟩",
    0.392: "t",
    0.401: "!",
    0.411: "r",
    0.460: '"',
    0.500: "*_`–",
    0.521: "s",
    0.525: "z",
    0.531: "?",
    0.550: "c",
    0.557: "L",
    0.575: "F",
    0.579: "k",
    0.592: "vxy",
    0.600: "⏵⏸",
    0.603: "P",
    0.611: "TY",
    0.612: "o",
    0.613: "a",
    0.615: "e",
    0.632: "E",
    0.634: "hnu",
    0.635: "Sbdgpq",
    0.636: "$0123456789{}",
    0.656: "K",
    0.684: "AV",
    0.685: "XZ",
    0.686: "B",
    0.695: "R",
    0.698: "C",
    0.732: "U",
    0.748: "N",
    0.752: "H",
    0.770: "D",
    0.775: "G",
    0.780: "&",
    0.787: "OQ",
    0.818: "w",
    0.838: "#+<=>^~≈→×✓✗↻",
    0.863: "M",
    0.950: "%",
    0.974: "m",
    0.989: "W",
    1.000: "@…—",
}
_EM = {c: em for em, chars in _EM_GROUPS.items() for c in chars}


def text_width(text: str, size: float = FONT_SIZE, *, bold: bool = False) -> float:
    """The estimated width of ``text`` at font size ``size`` (an over-estimate)."""
    em = sum(_EM.get(c, 1.0) for c in text)
    return em * size * (BOLD if bold else 1.0)
