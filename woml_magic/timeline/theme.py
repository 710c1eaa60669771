"""The timeline's colours on the page: JupyterLab's theme, with fallbacks (spec §6.3:
"Colours follow the front end's theme", WCAG AA contrast in light and dark themes).

Each text role reads a ``--jp-*`` variable through ``var(role)``; its fallback colour is
also what SVG elements carry as presentation attributes (``fill=…``), so the drawing
still reads where styles are stripped. The fills of bars are ``outcome_styles``'s.
"""

from __future__ import annotations

#: Fallback colours, used as presentation attributes and as the ``var()`` fallbacks.
#: Each is ≥ 4.5:1 on white (what a page without JupyterLab's variables shows).
TEXT = "#1f1f1f"
TEXT_MUTED = "#5f5f5f"
GRID = "#d0d0d0"
CODE_BG = "#eeeeee"
FOCUS = "#1976d2"

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
