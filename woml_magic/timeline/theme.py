"""The timeline's colours on the page: JupyterLab's theme, with fallbacks (spec §6.3:
"Colours follow the front end's theme", WCAG AA contrast in light and dark themes).

Each text role reads a ``--jp-*`` variable through ``var(role)``; its fallback colour is
also what SVG elements carry as presentation attributes (``fill=…``), so the drawing
still reads where styles are stripped. The fills of bars are ``outcome_styles``'s.

An image of the timeline (``image``: ``Run.to_svg``, ``Run.save``) cannot see any page's
theme: ``PALETTES`` gives each theme it offers its colours as literal values, the
background included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Fallback colours, used as presentation attributes and as the ``var()`` fallbacks.
#: Each is ≥ 4.5:1 on white (what a page without JupyterLab's variables shows).
TEXT = "#1f1f1f"
TEXT_MUTED = "#5f5f5f"
GRID = "#d0d0d0"
CODE_BG = "#eeeeee"
FOCUS = "#1976d2"
#: What the fallbacks sit on where no page gives a background (a picture, an image).
BACKGROUND = "#ffffff"

#: The theme colours (JupyterLab variables) each fixed role uses.
THEME_VARS: dict[str, tuple[str, str]] = {
    "text": ("--jp-content-font-color1", TEXT),
    "muted": ("--jp-content-font-color2", TEXT_MUTED),
    "code-bg": ("--jp-layout-color2", CODE_BG),
    "grid": ("--jp-border-color2", GRID),
    "focus": ("--jp-brand-color1", FOCUS),
}


def var(role: str) -> str:
    """The CSS value of ``role``: its theme variable, with its fallback colour."""
    name, fallback = THEME_VARS[role]
    return f"var({name},{fallback})"


@dataclass(frozen=True)
class Palette:
    """One theme's colours as literal values, for a drawing without a page around it: the
    background and the three text and line roles the SVG carries as presentation
    attributes (``TEXT``, ``TEXT_MUTED``, ``GRID`` in the light theme)."""

    background: str
    text: str
    muted: str
    grid: str


#: The themes an image of the timeline comes in (spec §6.3: light or dark, as the
#: notebook shows them). ``light`` is the fallbacks on white, the shared notebook's
#: picture (spec §6.5); ``dark`` is JupyterLab Dark's values resolved on its background
#: (``--jp-layout-color0`` #111111; ``--jp-content-font-color2``, white at 70 %, is
#: #b8b8b8 there; ``--jp-border-color2`` #424242). Text ≥ 4.5:1 on the background in both.
PALETTES: dict[str, Palette] = {
    "light": Palette(background=BACKGROUND, text=TEXT, muted=TEXT_MUTED, grid=GRID),
    "dark": Palette(background="#111111", text="#ffffff", muted="#b8b8b8", grid="#424242"),
}
#: ``PALETTES``'s names, for type checkers (a test keeps the two equal).
ThemeName = Literal["light", "dark"]
