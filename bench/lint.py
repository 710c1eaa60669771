"""Key linter speed figures (spec §3.5, §10.3): linting is linear in the script's size
for any nesting, and a cell whose scripts are larger than the linter reads is refused at
once with a note.

Each shape nests one construct deeper and deeper (``() => () => … 1``, functions in
functions, objects in objects, …) in one step's script, doubling the nesting four times
up to the linter's limit (``lint.MAX_LINT_CHARS``). The figure is the worst growth per
doubling: one size's time over the previous size's, divided by how much the script grew
(about 2), so 1.0 is linear and 2.0 quadratic (before the fix: 10,000 nested ``() =>``
took 32.9 s, ×3.7 per doubling). Each time is the fastest of seven runs (the machine is
shared). Goals: ≤ 1.5× per doubling, a script at the limit ≤ 1 s, and a script of almost
1 MiB noted as too large to lint ≤ 1 s (it is not read). ``results()`` returns the
figures as dicts (name, value, unit, goal, ok) for ``run_all.py``.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from woml_magic import parse  # noqa: E402 - needs ROOT on sys.path first
from woml_magic.lint import MAX_LINT_CHARS, NOT_LINTED, lint  # noqa: E402

RATIO_GOAL = 1.5
LIMIT_GOAL_S = 1.0
HUGE_GOAL_S = 1.0
DOUBLINGS = 4

CALL = (
    'await services.http.request({method: "POST", url: "http://127.0.0.1:9/c", '
    'idempotency: {header: "Idempotency-Key", value: k}}, {name: "c"});\n'
)


def _nest(head: str, tail: str, core: str = "1") -> Callable[[int], str]:
    return lambda n: "const k = " + head * n + core + tail * n + ";\n" + CALL


#: name → script of nesting depth n (each is valid JavaScript).
SHAPES: dict[str, Callable[[int], str]] = {
    "arrows () =>": _nest("() => ", ""),
    "arrows (a) =>": _nest("(a) => ", ""),
    "functions": _nest("function (a) { return ", "; }"),
    "blocks with let": lambda n: "{ let k = 1; " * n + CALL + "}" * n,
    "objects": _nest("{a: ", "}"),
    "calls f(": _nest("f(", ")"),
    "templates": _nest("`${", "}`"),
    "assignments": lambda n: "let k;\n" + "k = " * n + "1;\n" + CALL,
    "stray closers ((…]]": lambda n: "(" * n + "]" * n + "\nconst k = 1;\n" + CALL,
    "blocks declaring k": lambda n: "{ let k = 1; k = k + 1; }\n" * n + "const k = 1;\n" + CALL,
}


def _document(script: str) -> str:
    return f'<step id="s"><script>{script}</script></step>'


def _seconds(text: str, runs: int = 7) -> float:
    workflow = parse(text)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        lint(workflow)
        times.append(time.perf_counter() - start)
    return min(times)


def shape_times(shape: Callable[[int], str]) -> list[tuple[int, float]]:
    """(script characters, seconds) for the nesting doubled ``DOUBLINGS`` times, the
    largest at most ``MAX_LINT_CHARS``."""
    unit = len(shape(2)) - len(shape(1))
    top = (MAX_LINT_CHARS - len(shape(0))) // unit
    depths = [top >> k for k in range(DOUBLINGS, -1, -1)]
    return [(len(shape(n)), _seconds(_document(shape(n)))) for n in depths]


def huge_seconds() -> float:
    """A script of almost 1 MiB (the parser's limit): the time to the note that it was
    too large to lint."""
    text = _document("() => " * ((2**20 - 64) // 6) + "1")  # the largest document
    workflow = parse(text)
    start = time.perf_counter()
    found = lint(workflow)
    seconds = time.perf_counter() - start
    assert [w.code for w in found] == [NOT_LINTED], found
    return seconds


def results() -> list[dict[str, object]]:
    """Every figure of this bench: name, value, unit, goal, ok (and, per shape, the
    sizes and times measured and the growth of each doubling)."""
    rows: list[dict[str, object]] = []
    slowest = (0.0, "")
    for name, shape in SHAPES.items():
        points = shape_times(shape)
        ratios = [(b / max(a, 1e-9)) / (m / k) for (k, a), (m, b) in itertools.pairwise(points)]
        worst = max(ratios)
        rows.append(
            {
                "name": f"lint growth per doubling (1 = linear): {name}",
                "value": round(worst, 2),
                "unit": "×",
                "goal": RATIO_GOAL,
                "ok": worst <= RATIO_GOAL,
                "points": [(size, round(s * 1000, 1)) for size, s in points],
                "ratios": [round(r, 2) for r in ratios],
            }
        )
        slowest = max(slowest, (points[-1][1], name))
    rows.append(
        {
            "name": f"lint {MAX_LINT_CHARS:,} characters, slowest: {slowest[1]}",
            "value": round(slowest[0], 3),
            "unit": "s",
            "goal": LIMIT_GOAL_S,
            "ok": slowest[0] <= LIMIT_GOAL_S,
        }
    )
    huge = huge_seconds()
    rows.append(
        {
            "name": "lint a 1 MiB script (noted: too large to lint)",
            "value": round(huge, 4),
            "unit": "s",
            "goal": HUGE_GOAL_S,
            "ok": huge <= HUGE_GOAL_S,
        }
    )
    return rows


def main() -> None:
    for r in results():
        verdict = "ok" if r["ok"] else "MISS"
        print(f"{r['name']}: {r['value']} {r['unit']} (goal <= {r['goal']} {r['unit']}) {verdict}")
        if "points" in r:
            points: list[tuple[int, float]] = r["points"]  # type: ignore[assignment]
            shown = ", ".join(f"{size:,} chars {ms} ms" for size, ms in points)
            print(f"  {shown}; ratios {r['ratios']}")


if __name__ == "__main__":
    main()
