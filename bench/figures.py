"""Printing a bench's figures: ``print_figures(rows)`` writes one line a figure (name,
value, unit, and its goal with ok or MISSED) and returns the exit status, 0 when every
goal was met. A row is ``{name, value, unit, goal, ok}`` (``goal`` None: no goal)."""

from __future__ import annotations

from typing import Any


def print_figures(rows: list[dict[str, Any]], width: int = 30) -> int:
    for f in rows:
        goal = f" (goal {f['goal']}: {'ok' if f['ok'] else 'MISSED'})" if f["goal"] else ""
        print(f"{f['name']:<{width}} {f['value']:>9} {f['unit']}{goal}")
    return 0 if all(f["ok"] for f in rows) else 1
