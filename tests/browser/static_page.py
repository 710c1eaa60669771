"""A static page in a JupyterLab theme, opened in the session's headless Chromium.

For tests of what a notebook output does on its own (its inline script, its styles):
``open_page(body, theme)`` loads ``body`` from a file, with JupyterLab's light or dark
``--jp-*`` variables, and fails the test if the page threw.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

THEMES = Path(sys.prefix) / "share/jupyter/lab/themes/@jupyterlab"


def theme_vars(theme: str) -> str:
    """The ``:root`` block of JupyterLab's light or dark theme: its --jp-* variables."""
    css = (THEMES / f"theme-{theme}-extension/index.css").read_text()
    found = re.search(r":root\{[^}]*\}", css)
    assert found, f"no :root block in JupyterLab's {theme} theme"
    return found.group(0)


def page_html(body: str, theme: str = "light") -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{theme_vars(theme)}"
        "body { background: var(--jp-layout-color0); color: var(--jp-content-font-color1);"
        " font-family: var(--jp-ui-font-family); margin: 12px; }</style></head>"
        f"<body>{body}<div style='height:1200px'></div></body></html>"
    )


def pages(browser: Any, folder: Path) -> Iterator[Callable[..., Any]]:
    """Yield ``open_page(body, theme="light", width=1000, height=700)``; afterwards check
    that no page threw and close them all."""
    opened: list[Any] = []

    def open_page(body: str, theme: str = "light", width: int = 1000,
                  height: int = 700) -> Any:
        path = folder / f"page{len(opened)}.html"
        path.write_text(page_html(body, theme), encoding="utf-8")
        page = browser.new_page(viewport={"width": width, "height": height})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri())
        page.errors = errors
        opened.append(page)
        return page

    yield open_page
    for page in opened:
        assert page.errors == []
        page.close()
