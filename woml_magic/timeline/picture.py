"""The picture a saved timeline shows where scripts cannot run (spec §6.5).

``picture(svg, alt, compact=…)`` is ``img.woml-picture``: the drawing as an SVG data
URI, which sanitizers that strip inline SVG, ``<style>`` and ``<script>`` keep, on the
light background an image needs (it cannot see the page's theme).

An image has no buttons, no tooltips and no script reading its data, so for a big run
(``html.DEFER_DETAILS_AT``) the picture is ``compact_svg`` of ``leading_drawing``: the
run's first steps (``layout.SHOWN_ATTEMPTS``) on the whole run's axis, a line under
them saying how many steps it leaves out, the same shapes and words without what only
the live drawing uses. The live drawing then comes from ``drawing_data`` (the whole
SVG, its lanes apart, gzipped; a data URI cannot be), which the script decodes in place
of the picture, building only the lanes near the view (``timeline.js``, ``adoptPicture``,
``LazyLanes``). For a 1,000-step × 3-attempt run: the picture from
4.2 MB of base64 (98,000 px tall) to 0.07 MB (6,700 px), plus 0.35 MB of data (issue
21: a notebook in git carries every byte; the browser decodes a data URI's picture
while it parses the page, even where the script replaces it a moment later).
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import re

from .geometry import FONT_SIZE
from .layout import SHOWN_ATTEMPTS, TimelineLayout, leading_lanes, left_out
from .markup import esc
from .svg import render_svg, svg_parts
from .theme import BACKGROUND, TEXT

#: The picture's own background: as an <img> the SVG cannot see the page's theme, so
#: its fallback colours (dark text) sit on white, readable on a dark page too.
PICTURE_BG = BACKGROUND
#: Attributes only the live drawing uses (focus, roles), also dropped by ``image``.
INTERACTIVE = ("tabindex", "role")
#: ... and, in a compact picture, what only the script or assistive technology reads.
_LIVE_ONLY = (*INTERACTIVE, "aria-label", "class")
#: Presentation attributes a compact picture states once per combination, as a class
#: of its own ``<style>`` (CSS in an SVG document works in an <img>).
_PAINT = (
    "fill",
    "fill-opacity",
    "stroke",
    "stroke-width",
    "stroke-dasharray",
    "font-size",
    "font-weight",
    "font-style",
    "text-anchor",
)
#: Coordinates written with a decimal that says nothing: ``540.0`` → ``540``.
_GEOMETRY = ("x", "y", "width", "height", "x1", "y1", "x2", "y2", "points")
_POINT_ZERO = re.compile(r"(?<=\d)\.0(?![\d])")
_TAG = re.compile(r'<(/?)([a-zA-Z]+)((?:\s+[a-zA-Z][\w:.-]*="[^"]*")*)\s*(/?)>')
_ATTR = re.compile(r'([a-zA-Z][\w:.-]*)="([^"]*)"')
_TOOLTIP = re.compile(r"<title>[^<]*</title>")


def picture(svg: str, alt: str, *, compact: bool = False) -> str:
    """``svg`` (``svg.render_svg``'s drawing) as ``img.woml-picture``, its ``src`` a
    base64 data URI of the SVG on ``PICTURE_BG`` (``compact_svg`` of it when
    ``compact``), its ``width``/``height`` the drawing's."""
    shown = compact_svg(svg) if compact else svg
    opened = shown.index(">") + 1
    backed = (
        shown[:opened] + f'<rect class="woml-picture-bg" width="100%" height="100%"'
        f' fill="{PICTURE_BG}"/>' + shown[opened:]
    )
    size = " ".join(f'{name}="{value}"' for name, value in _svg_size(svg))
    data = base64.b64encode(backed.encode("utf-8")).decode("ascii")
    return (
        f'<img class="woml-picture" {size} style="max-width:100%;height:auto"'
        f' alt="{esc(alt)}" src="data:image/svg+xml;base64,{data}"/>'
    )


#: The height of the line under a bounded picture's lanes that says what it left out.
LEFT_OUT_H = 24.0


def leading_drawing(layout: TimelineLayout, rid: str, attempts: int = SHOWN_ATTEMPTS) -> str:
    """``render_svg`` of ``layout``'s first lanes (``layout.leading_lanes``: at most
    ``attempts`` attempts) on the whole run's axis, and, if it leaves lanes out,
    ``text.woml-left-out`` under them saying how many and where they are (spec §6.5:
    the picture of a big run; the panel below it lists every step)."""
    lanes = layout.lanes
    shown = leading_lanes(lanes, attempts)
    if shown == len(lanes):
        return render_svg(layout, rid)
    cut = lanes[shown].y
    part = dataclasses.replace(layout, lanes=lanes[:shown], lanes_bottom=cut + LEFT_OUT_H)
    note = (
        f"… and {left_out(lanes[shown:])}, not in this picture: the listing below has every step."
    )
    drawn = render_svg(part, rid)
    return (
        drawn[: -len("</svg>")]
        + f'<text class="woml-left-out" x="6" y="{cut + 14:.0f}" font-size="{FONT_SIZE}"'
        f' fill="{TEXT}">{esc(note)}</text></svg>'
    )


def _svg_size(svg: str) -> list[tuple[str, str]]:
    head = svg[: svg.index(">")]
    return [
        (name, head.split(f' {name}="', 1)[1].split('"', 1)[0])
        for name in ("width", "height")
        if f' {name}="' in head
    ]


def compact_svg(svg: str) -> str:
    """``svg`` drawn the same, for an image: without tooltips (every ``<title>`` but
    the drawing's own), ``data-*``, classes, roles and ``aria-label``; without shapes
    that paint nothing (a transparent rect without stroke, a line of no length); groups
    left without attributes unwrapped; each combination of presentation attributes
    (``_PAINT``) one class of a ``<style>``; ``.0`` dropped from coordinates.

    One pass over the tags of ``svg.render_svg``'s markup, which ``markup.esc`` keeps
    regular: no ``<`` in text, no ``"`` in an attribute's value, no text between
    elements but in ``<text>`` and ``<title>`` (an XML parser and tree took 1 s for a
    1,000-step run, this ≈ 0.2 s)."""
    no_tips = _TOOLTIP.sub("", svg[svg.index(">") + 1 :])
    head = _TAG.match(svg)
    if head is None or head.group(2) != "svg":
        raise ValueError("compact_svg takes a drawing of svg.render_svg")
    root_font = dict(_ATTR.findall(head.group(3))).get("font-size")
    classes: dict[str, str] = {}
    bare: list[bool] = []  # per open <g>: whether it is unwrapped

    def tag(m: re.Match[str]) -> str:
        closing, name, attrs, end = m.groups()
        if name == "g":
            if closing:
                return "" if bare.pop() else m.group()
            kept = [(n, v) for n, v in _ATTR.findall(attrs) if not _live_only(n)]
            bare.append(not kept)
            return "" if not kept else "<g" + "".join(f' {n}="{v}"' for n, v in kept) + ">"
        if closing:
            return m.group()
        got = dict(_ATTR.findall(attrs))
        if _paints_nothing(name, got):
            return ""
        out, paint = [], []
        for n, v in got.items():
            if _live_only(n) or (n == "font-size" and v == root_font):
                continue
            if n in _PAINT:
                paint.append(f"{n}:{v}")
            else:
                out.append(f' {n}="{_POINT_ZERO.sub("", v) if n in _GEOMETRY else v}"')
        if paint:
            rule = ";".join(paint)
            out.append(f' class="{classes.setdefault(rule, f"c{len(classes)}")}"')
        return f"<{name}{''.join(out)}{end}>"

    body = _TAG.sub(tag, no_tips)
    root = [(n, v) for n, v in _ATTR.findall(head.group(3)) if not _live_only(n)]
    style = "".join(f".{name}{{{rule}}}" for rule, name in classes.items())
    title = _TOOLTIP.match(svg, head.end())
    return (
        "<svg"
        + "".join(f' {n}="{v}"' for n, v in root)
        + ">"
        + (title.group() if title else "")
        + f"<style>{style}</style>"
        + body
    )


def _live_only(name: str) -> bool:
    return name.startswith("data-") or name in _LIVE_ONLY


def _paints_nothing(name: str, attrs: dict[str, str]) -> bool:
    if name == "rect":
        return attrs.get("fill") == "transparent" and "stroke" not in attrs
    if name == "line":
        return attrs.get("x1") == attrs.get("x2") and attrs.get("y1") == attrs.get("y2")
    return False


def drawing_data(layout: TimelineLayout, rid: str) -> str:
    """``script.woml-drawing-data[type=application/gzip]``: the live drawing of
    ``layout``, which the script puts in place of a compact picture, gzipped, in base64:
    one line of JSON, ``{"svg": length, "lanes": [[ref, y, height, segments, length],
    …]}``, then the drawing without its lanes (``svg.svg_parts``) and each lane's
    ``g.woml-lane`` in order, their lengths in UTF-16 code units (a JavaScript string's)
    as the line says, with each lane's ``data-step``, top and height in the drawing's px
    and number of segments. The script builds only the lanes near the view, the others
    as they come near it (``timeline.js``, ``LazyLanes``): parsing and laying out all
    of a 1,000-step run's (a 98,000 px tall SVG of 21,000 elements) took most of the
    time to show it (issue 21 item 6), and the markup as JSON strings 30 ms more to
    parse. Base64 holds no ``<``, ``&`` or ``]]>``: the page stays well-formed XML, and
    sanitizers drop the whole element with its text."""
    head, lanes, tail = svg_parts(layout, rid)
    shell = head + tail
    index = {
        "svg": _js_length(shell),
        "lanes": [
            [lane.ref, lane.y, lane.height, len(lane.drawn), _js_length(markup)]
            for lane, markup in zip(layout.lanes, lanes, strict=True)
        ],
    }
    text = json.dumps(index, separators=(",", ":")) + "\n" + shell + "".join(lanes)
    packed = gzip.compress(text.encode("utf-8"), mtime=0)
    return (
        '<script type="application/gzip" class="woml-drawing-data">'
        f"{base64.b64encode(packed).decode('ascii')}</script>"
    )


def _js_length(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units (a character beyond U+FFFF
    takes two)."""
    return len(text.encode("utf-16-le")) // 2
