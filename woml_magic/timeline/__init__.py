"""The timeline of a run: plain text, static HTML with inline SVG, and a live widget
(spec §6.3).

``render_text`` and ``render_html`` work anywhere (terminals, nbconvert, GitHub);
``mimebundle`` is what ``Run._repr_mimebundle_`` shows. ``TimelineWidget`` is the
ipywidgets view with live updates, a Cancel button and replay; it is imported lazily
so that the engine and ``import woml_magic.timeline`` never load ipywidgets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model import Run
from .html import render_html
from .text import render_text

if TYPE_CHECKING:
    from .widget import TimelineWidget

__all__ = ["TimelineWidget", "mimebundle", "render_html", "render_text"]


def mimebundle(run: Run) -> dict[str, Any]:
    """``text/plain`` and ``text/html`` renderings of ``run`` (spec §6.3).

    Cheap and free of widgets: front ends without a widget manager show one of these;
    the magic displays a ``TimelineWidget`` where widgets work.
    """
    return {"text/plain": render_text(run), "text/html": render_html(run)}


def __getattr__(name: str) -> Any:
    # ipywidgets loads only when someone asks for the widget (spec §6.3, STYLE 4).
    if name == "TimelineWidget":
        from .widget import TimelineWidget

        return TimelineWidget
    raise AttributeError(f"module 'woml_magic.timeline' has no attribute {name!r}")
