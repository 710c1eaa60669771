"""Every benchmark's figures next to their goals, in one table (issue "Teaching notebooks").

Run: ``python bench/run_all.py`` (add ``--markdown`` for the table used in
docs/performance.md). Each bench module exposes ``results()``: rows of name, value,
unit, goal and ok. Goals are checked here, never in unit tests: the machine is noisy,
so figures that are ratios against a baseline are measured in the same run.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
MODULES = ["parse", "lint", "worker", "engine", "http_calls", "journal", "timeline", "cell",
           "completion", "editor", "browser", "steps", "temporal", "lab"]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"woml_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def goal_text(goal: object) -> str:
    """A goal as written: a bare number is an upper bound; None means a baseline row."""
    if goal is None:
        return "—"
    if isinstance(goal, (int, float)):
        return f"≤ {goal:g}"
    return str(goal).replace("<=", "≤").replace(">=", "≥")


def collect() -> list[tuple[str, dict[str, Any]]]:
    rows: list[tuple[str, dict[str, Any]]] = []
    for name in MODULES:
        for row in _load(name).results():
            rows.append((name, row))
    return rows


def machine() -> str:
    cores = len(__import__("os").sched_getaffinity(0))
    return (f"{platform.processor() or platform.machine()}, {cores} cores, "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = collect()
    misses = sum(1 for _, row in rows if not row["ok"])
    if args.markdown:
        print(f"Measured {started} on {machine()}.\n")
        print("| bench | figure | value | goal | |")
        print("|---|---|---|---|---|")
        for bench, row in rows:
            mark = "ok" if row["ok"] else "**miss**"
            print(f"| {bench} | {row['name']} | {row['value']:.2f} {row['unit']} | "
                  f"{goal_text(row['goal'])} | {mark} |")
    else:
        print(f"{'bench':<11} {'figure':<52} {'value':>12} {'unit':<5} {'goal':<14} ok")
        for bench, row in rows:
            mark = "ok" if row["ok"] else "MISS"
            print(f"{bench:<11} {row['name'][:52]:<52} {row['value']:>12.2f} "
                  f"{row['unit']:<5} {goal_text(row['goal']):<14} {mark}")
        print(f"\n{len(rows)} figures, {misses} missed their goal; {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
