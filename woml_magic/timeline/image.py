"""The timeline as an image for slides and documents (spec §6.3: ``run.to_svg()``,
``run.save(PATH)``, ``%woml save RUN_ID PATH``).

``to_svg(run, theme=…)`` is the notebook's static drawing — ``svg.render_svg`` of
``layout.compute_layout``, the lanes the notebook shows — as a standalone SVG document
that looks the same in a browser, Inkscape, PowerPoint, Keynote or a Markdown page: on
its own background, under a header line (the notebook's: workflow, run, clock, status,
``t = …``), with every colour and font a literal value (no ``var(--jp-…)``, no
``system-ui``: nothing that only a notebook page defines). The drawing is the
notebook's, recoloured to the theme's ``theme.PALETTES`` entry and with its
interactive attributes (``tabindex``, ``role="button"``) dropped: an image has no
buttons. ``to_png`` rasterizes it with resvg (the optional extra ``png``), ``scale``
pixels per drawing px; ``save`` writes either, by the file's suffix.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from lxml import etree

from ..errors import WomlExtraMissing, WomlImageError
from ..model import Run
from .axis import format_time
from .geometry import text_width
from .layout import TimelineLayout, compute_layout
from .picture import INTERACTIVE
from .svg import COMPARE_AXIS, render_svg
from .theme import GRID, PALETTES, TEXT, TEXT_MUTED, Palette

if TYPE_CHECKING:
    from .compare import Comparison

#: The file types ``save`` writes, by suffix (compared without case).
SUFFIXES = (".svg", ".png")
#: ``to_png``'s pixels per drawing px: 2 is crisp on a slide shown on a 4K screen or
#: projector; more only makes the file bigger. Bounded so a typo cannot ask for a
#: gigapixel image.
DEFAULT_SCALE = 2.0
MAX_SCALE = 8.0
#: The drawing's font as concrete families (the notebook says ``system-ui,
#: sans-serif``, which only a browser resolves). Each is no wider than DejaVu Sans,
#: whose widths the layout assumes (``geometry.text_width``), so every label still fits
#: its place; whichever a viewer or the rasterizer has first is used.
FONT_FAMILY = (
    "'Segoe UI', 'Helvetica Neue', Helvetica, Arial, 'Liberation Sans', 'DejaVu Sans', sans-serif"
)
#: The header line above the lanes: its font size (the notebook's 13 px) and height.
HEADER_FONT = 13.0
HEADER_H = 22.0
#: The longest workflow or run id the header quotes in full, and the longest path an
#: error message does (STYLE 15).
HEADER_ID_CHARS = 48
MAX_QUOTED = 120
#: The pattern ids inside the image (``render_svg``'s ``rid``): fixed, so one run's
#: image is the same bytes every time.
IMAGE_RID = "woml-image"

_SVG_NS = "http://www.w3.org/2000/svg"
#: Children of ``<svg>`` that are not drawn: they stay first, the title foremost (as
#: assistive technology expects).
_NOT_DRAWN = (f"{{{_SVG_NS}}}title", f"{{{_SVG_NS}}}defs")
_PNG_EXTRA = 'pip install "woml-magic[png]"'


def palette(theme: str) -> Palette:
    """The colours of ``theme`` (spec §6.3), or a ``WomlImageError`` naming it."""
    found = PALETTES.get(theme) if isinstance(theme, str) else None
    if found is None:
        allowed = " or ".join(repr(t) for t in PALETTES)
        raise WomlImageError(f"unknown theme {theme!r}: an image's theme is {allowed}")
    return found


def layout_of(subject: Run | Comparison) -> TimelineLayout:
    """The layout a run's or a comparison's image draws (the notebook's)."""
    return compute_layout(subject) if isinstance(subject, Run) else subject.layout()


def to_svg(run: Run | Comparison, *, theme: str = "light", header: bool = True) -> str:
    """``run``'s timeline as a standalone SVG document in ``theme`` (spec §6.3): the
    notebook's drawing on the theme's background, under the notebook's header line
    unless ``header`` is false, every colour and font a literal value. Its
    ``width``/``height`` are the drawing's size in CSS px (``viewBox`` the same). A
    ``Comparison`` (``compare``) draws the same way, under its own header line."""
    colours = palette(theme)
    layout = layout_of(run)
    root = etree.fromstring(render_svg(layout, IMAGE_RID))
    recolour = {TEXT: colours.text, TEXT_MUTED: colours.muted, GRID: colours.grid}
    for el in root.iter(etree.Element):
        for name in ("fill", "stroke"):
            value = el.get(name)
            if value in recolour:
                el.set(name, recolour[value])
        if el is not root:
            for name in INTERACTIVE:  # an image has no buttons to focus
                if name in el.attrib:
                    del el.attrib[name]
    root.set("role", "img")
    root.set("font-family", FONT_FAMILY)
    width, height = float(root.get("width", "0")), float(root.get("height", "0"))
    if header:
        line, line_w = _header(layout, colours)
        _push_down(root, HEADER_H)
        root.insert(_first_drawn(root), line)
        width = max(width, math.ceil(line_w + 12))
        height += HEADER_H
    size = {"width": f"{width:.0f}", "height": f"{height:.0f}"}
    root.set("width", size["width"])
    root.set("height", size["height"])
    root.set("viewBox", f"0 0 {size['width']} {size['height']}")
    background = etree.Element(
        f"{{{_SVG_NS}}}rect",
        {
            "class": "woml-picture-bg",
            "width": size["width"],
            "height": size["height"],
            "fill": colours.background,
        },
    )
    root.insert(_first_drawn(root), background)
    return etree.tostring(root, encoding="unicode")


def to_png(
    run: Run | Comparison,
    *,
    theme: str = "light",
    scale: float = DEFAULT_SCALE,
    header: bool = True,
) -> bytes:
    """``to_svg(run, theme=…)`` as PNG bytes, ``scale`` pixels per drawing px (so its
    size is the SVG's × ``scale``, rounded). Needs the ``png`` extra (resvg, which
    brings its own renderer and reads the system's fonts)."""
    zoom = _checked_scale(scale)
    palette(theme)  # a bad theme is named before a missing extra
    try:
        import resvg_py
    except ImportError:
        raise WomlExtraMissing(
            "saving a timeline as PNG needs resvg-py, which is not installed; install it "
            f"with: {_PNG_EXTRA} (or save it as .svg, which needs nothing)",
            extra="png",
        ) from None
    svg = to_svg(run, theme=theme, header=header)
    return bytes(resvg_py.svg_to_bytes(svg_string=svg, zoom=zoom))


def save(
    run: Run | Comparison,
    path: str | os.PathLike[str],
    *,
    theme: str = "light",
    scale: float = DEFAULT_SCALE,
    header: bool = True,
) -> Path:
    """Write ``run``'s timeline to ``path`` (spec §6.3): ``.svg`` is ``to_svg``'s
    document, ``.png`` ``to_png``'s picture (``scale`` applies to PNG only). The folder
    must exist; a file there is replaced. Returns the path written, absolute (``~``
    expanded). Anything it cannot do is a ``WomlImageError`` naming why."""
    target = Path(os.path.expanduser(os.fspath(path))).absolute()
    named = _quoted(os.fspath(path))
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        allowed = " or ".join(SUFFIXES)
        what = f"has the suffix {target.suffix!r}" if target.suffix else "has no suffix"
        raise WomlImageError(
            f"cannot save a timeline as {named}: the file name {what}; it must end "
            f"in {allowed} (e.g. {target.stem or 'run'}.svg)"
        )
    _checked_scale(scale)  # for .svg too: a bad scale is a mistake even where it is unused
    palette(theme)
    try:
        if target.is_dir():
            raise WomlImageError(
                f"cannot save a timeline as {named}: it is a folder; "
                f"name a file in it, e.g. {target / ('run' + suffix)}"
            )
        folder = target.parent
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist; create it first"
            raise WomlImageError(
                f"cannot save a timeline as {named}: {_quoted(str(folder))} {what}"
            )
        if suffix == ".svg":
            data = to_svg(run, theme=theme, header=header).encode("utf-8")
        else:
            data = to_png(run, theme=theme, scale=scale, header=header)
        target.write_bytes(data)
    except OSError as exc:  # a name too long, no permission, a full disk
        raise WomlImageError(f"cannot save a timeline as {named}: {exc.strerror or exc}") from None
    return target


def _quoted(path: str) -> str:
    """``path`` as a message quotes it: in full up to ``MAX_QUOTED`` characters, else
    its start and end around an ellipsis (STYLE 15)."""
    if len(path) > MAX_QUOTED:
        half = MAX_QUOTED // 2
        path = path[:half] + "…" + path[-half:]
    return repr(path)


def _checked_scale(scale: float) -> float:
    ok = isinstance(scale, (int, float)) and not isinstance(scale, bool)
    if not ok or not 0 < scale <= MAX_SCALE or not math.isfinite(scale):
        raise WomlImageError(
            f"scale {scale!r} is not allowed: it is the PNG's pixels per drawing px, a "
            f"number above 0 and at most {MAX_SCALE:g} (default {DEFAULT_SCALE:g})"
        )
    return float(scale)


def _header(layout: TimelineLayout, colours: Palette) -> tuple[etree._Element, float]:
    """The notebook's header line (``html.render_html``'s ``div.woml-header``) as SVG
    text, the workflow and status in bold, and its estimated width."""
    parts = [
        ("workflow ", False),
        (_bounded(layout.workflow_id), True),
        (f" · run {_bounded(layout.run_id)} · {layout.clock} clock · ", False),
        (layout.status, True),
        (f" · t = {format_time(layout.now)}", False),
    ]
    if layout.bands:  # a comparison: its runs by label (spec §10.4)
        parts = [("compare ", False)]
        for i, band in enumerate(layout.bands):
            parts += [(" · " if i else "", False), (_bounded(band.label), True)]
        parts.append((f" · {layout.clock} clock · {COMPARE_AXIS}", False))
    text = etree.Element(
        f"{{{_SVG_NS}}}text",
        {
            "class": "woml-header",
            "x": "6",
            "y": f"{HEADER_H - 7:.0f}",
            "font-size": f"{HEADER_FONT:g}",
            "fill": colours.text,
        },
    )
    for words, bold in parts:
        span = etree.SubElement(text, f"{{{_SVG_NS}}}tspan")
        if bold:
            span.set("font-weight", "bold")
        span.text = words
    width = sum(text_width(words, HEADER_FONT, bold=bold) for words, bold in parts)
    return text, width


def _bounded(value: str) -> str:
    return value if len(value) <= HEADER_ID_CHARS else value[: HEADER_ID_CHARS - 1] + "…"


def _push_down(root: etree._Element, dy: float) -> None:
    """Move everything drawn (all but ``<title>`` and ``<defs>``) ``dy`` px down."""
    group = etree.Element(f"{{{_SVG_NS}}}g", {"transform": f"translate(0 {dy:g})"})
    for child in list(root):
        if child.tag not in _NOT_DRAWN:
            group.append(child)
    root.append(group)


def _first_drawn(root: etree._Element) -> int:
    """The index of ``root``'s first drawn child (after ``_NOT_DRAWN``'s)."""
    return next((i for i, child in enumerate(root) if child.tag not in _NOT_DRAWN), len(root))
