"""The timeline of a run: plain text, static HTML with inline SVG, its behaviour in the
browser, and a live widget (spec §6.3).

``render_text`` and ``render_html`` work anywhere (terminals, nbconvert, GitHub).
The behaviour (select an attempt, replay a finished run) is one piece of JavaScript,
``timeline.js``, used twice: inlined after the static drawing by ``interactive_html``
(front ends that run scripts of trusted HTML outputs: JupyterLab, Notebook 7, exported
HTML; where scripts are stripped the drawing stays as it is), as text that a small
loader compiles once per page (``inline_script``), and as the ES module of
``TimelineWidget``, the anywidget shown while a run is live. ``mimebundle`` is what
``Run._repr_mimebundle_`` shows. The widget is imported lazily so that the engine and
``import woml_magic.timeline`` never load ipywidgets or anywidget.

The modules, by concept. One layout serves every renderer: ``layout``
(``compute_layout``) builds ``lanes`` (a step's attempts, waits and planned schedule as
segments), maps them on the ``axis`` (true to time, breaks, ticks, ``format_time``) and
draws them with ``placement`` (bars and labels), in the sizes of ``geometry``; each
outcome's colour and pattern is in ``outcome_styles``, calls and errors in words in
``verdicts``. ``text`` writes the plain-text table; ``html`` the page, around ``svg``
(the drawing) and ``details`` (the details panel), in the colours of ``theme``, with
``markup`` escaping what it shows; a saved output's drawing is ``picture``'s image (a
big run's compact, with its live drawing as data). ``lineage`` reads a step's key
lineage (spec §10.3: what the server did with every request that carried the step's
key), shown in the details panel and the text table, and on its own by
``lineage_table`` (with a server's ledger, ``ledger_line``). ``image`` makes the
drawing an image for slides (``Run.to_svg``, ``Run.save``: a standalone SVG in a theme
of ``theme.PALETTES``, or a PNG); it loads only when a run is saved, and its rasterizer
(the ``png`` extra) only for a PNG. ``compare`` lays several finished runs' lanes out
on one axis (``wm.compare``, spec §10.4): the same layout, drawing and script.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model import Run
from .html import render_html
from .layout import SHOWN_ATTEMPTS
from .lineage import ledger_line
from .lineage_table import LineageTable, lineage_table
from .text import render_text

if TYPE_CHECKING:
    from .widget import TimelineWidget

__all__ = [
    "LineageTable",
    "TimelineWidget",
    "interactive_html",
    "ledger_line",
    "lineage_table",
    "mimebundle",
    "render_html",
    "render_text",
    "timeline_js",
    "timeline_version",
    "widget_esm",
]

# render_html gives its root a unique id; the script falls back on it.
_ROOT_ID = re.compile(r'\sid="(woml-tl-[^"]*)"')


@functools.cache
def timeline_js() -> str:
    """The source of ``timeline.js``, read once per process.

    It defines one name, ``womlTimeline``; the wrappers below give it a scope.
    """
    text = (Path(__file__).parent / "timeline.js").read_text(encoding="utf-8")
    # It is inlined in HTML inside a CDATA section (so the page stays well-formed XML).
    for bad in ("</script", "]]>"):
        if bad in text.lower():
            raise RuntimeError(f"timeline.js must not contain {bad!r}: it is inlined in HTML")
    return text


#: Where the page keeps compiled copies of ``timeline.js``: a ``Map`` from a version
#: (``timeline_version``) to its ``womlTimeline``, on a symbol-keyed property of the
#: page's global object (no global name: the page's own scripts never see it).
REGISTRY_KEY = "woml-magic.timeline"


@functools.cache
def timeline_version() -> str:
    """A digest of ``timeline.js``: outputs of one version share one compiled copy in a
    page, outputs of another version (a notebook saved by an older release) get their
    own."""
    return hashlib.sha256(timeline_js().encode("utf-8")).hexdigest()[:16]


@functools.cache
def _code_literal() -> str:
    # The code as a JavaScript string literal: V8 only scans a string (it never parses
    # or compiles what is inside), so an output whose version the page has already
    # compiled costs a scan of 24 KB, not a compile. ``sourceURL`` names it in stacks.
    body = (
        f"{timeline_js()}\nreturn womlTimeline;\n"
        f"//# sourceURL=woml-timeline-{timeline_version()}.js\n"
    )
    return json.dumps(body)


def inline_script(root_id: str) -> str:
    """The classic ``<script>`` that follows a static timeline and gives it behaviour
    (spec §6.3, §6.5).

    Each output carries the whole of ``timeline.js``, so an output alone (a saved page,
    an export opened offline) still works, but as inert text: a string that the script
    compiles (``new Function``) only when the page has no compiled copy of this version
    yet, then keeps in the page's registry (``REGISTRY_KEY``). So the code is compiled
    once per page and version, however many timelines the page shows, and its compiled
    functions are shared. Everything runs inside an arrow function (no global name
    leaks); the script finds its root as the element just before it, or by ``root_id``.
    The CDATA markers, hidden from JavaScript behind line comments, keep the HTML
    well-formed XML.
    """
    return (
        "<script>//<![CDATA[\n(() => {\n"
        f"const key = Symbol.for({json.dumps(REGISTRY_KEY)});\n"
        "const registry = globalThis[key] || (globalThis[key] = new Map());\n"
        f"const version = {json.dumps(timeline_version())};\n"
        "let womlTimeline = registry.get(version);\n"
        "if (womlTimeline === undefined) {\n"
        f"  womlTimeline = new Function({_code_literal()})();\n"
        "  registry.set(version, womlTimeline);\n"
        "}\n"
        f"womlTimeline.fromScript(document.currentScript, {json.dumps(root_id)});\n"
        "})();\n//]]></script>"
    )


def widget_esm() -> str:
    """The anywidget ES module: ``timeline.js`` with a default export calling its
    ``render`` (the module scope keeps ``womlTimeline`` private)."""
    return (
        f"{timeline_js()}\n"
        "export default { render({ model, el }) { return womlTimeline.render(model, el); } };\n"
    )


def interactive_html(run: Run) -> str:
    """``render_html(run)``, its drawing as a picture (spec §6.5: a shared notebook keeps
    it), followed by the inline script that makes it live and interactive again."""
    drawing = render_html(run, as_picture=True)
    found = _ROOT_ID.search(drawing)
    return drawing + inline_script(found.group(1) if found else "")


def mimebundle(run: Run) -> dict[str, Any]:
    """``text/plain`` and ``text/html`` renderings of ``run`` (spec §6.3).

    Cheap and free of widgets: what a finished run shows everywhere; the magic
    displays a ``TimelineWidget`` while a run is live. A big run's ``text/plain`` is
    its first steps (``layout.SHOWN_ATTEMPTS``) and a line on what was left out: a
    notebook stores every byte of it (issue 21 item 6).
    """
    return {
        "text/plain": render_text(run, max_attempts=SHOWN_ATTEMPTS),
        "text/html": interactive_html(run),
    }


def __getattr__(name: str) -> Any:
    # anywidget/ipywidgets load only when someone asks for the widget (spec §6.3, STYLE 4).
    if name == "TimelineWidget":
        from .widget import TimelineWidget

        return TimelineWidget
    raise AttributeError(f"module 'woml_magic.timeline' has no attribute {name!r}")
