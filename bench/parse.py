"""Parser speed figures (spec §2): parse a 1,000-step document; ``import woml_magic``.

Prints each figure with its goal and ``ok`` or ``MISS``. ``results()`` returns the same
figures as dicts (name, value, unit, goal, ok) for a combined runner. Goals:
parse of 1,000 steps ≤ 50 ms (median of several runs); ``import woml_magic`` ≤ 150 ms
over a bare interpreter, both measured in fresh processes in the same run (medians).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from woml_magic import parse  # noqa: E402 - needs ROOT on sys.path first

PARSE_GOAL_MS = 50.0
IMPORT_GOAL_MS = 150.0
STEP = """\
  <step id="step{i}" retry="4" retry-backoff="exponential" retry-delay="1s"
        retry-max-delay="10s" timeout="30s">
    <!-- step {i} -->
    <script>
      const response = await services.http.request({{
        method: "POST", url: "https://api.example.com/items/{i}",
        json: {{ n: {i}, ok: a < b && c > d }},
        idempotency: {{ header: "Idempotency-Key", value: attempt.idempotencyKey }}
      }}, {{ name: "item-{i}" }});
      return response.data;
    </script>
  </step>
"""


def document(steps: int = 1000) -> str:
    """A realistic workflow of ``steps`` steps, each with a multi-line script."""
    body = "".join(STEP.format(i=i) for i in range(steps))
    return f'<workflow id="bench">\n{body}</workflow>\n'


def parse_ms(runs: int = 15) -> float:
    """Median wall time of ``parse`` on the 1,000-step document, in ms."""
    text = document()
    parse(text)  # warm up: lazy imports, regex compilation
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        parse(text)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _process_ms(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return (time.perf_counter() - start) * 1000


def import_ms(runs: int = 9) -> tuple[float, float]:
    """Median ``import woml_magic`` and bare-interpreter times in fresh processes, in ms.

    Runs alternate so that machine load hits both alike.
    """
    bare, loaded = [], []
    for _ in range(runs):
        bare.append(_process_ms("pass"))
        loaded.append(_process_ms("import woml_magic"))
    return statistics.median(loaded), statistics.median(bare)


def results() -> list[dict[str, object]]:
    """Every figure of this bench: name, value, unit, goal, ok."""
    parsed = parse_ms()
    loaded, bare = import_ms()
    imported = loaded - bare
    return [
        {
            "name": "parse 1,000-step document (median)",
            "value": round(parsed, 2),
            "unit": "ms",
            "goal": PARSE_GOAL_MS,
            "ok": parsed <= PARSE_GOAL_MS,
        },
        {
            "name": "import woml_magic over bare python (median)",
            "value": round(imported, 2),
            "unit": "ms",
            "goal": IMPORT_GOAL_MS,
            "ok": imported <= IMPORT_GOAL_MS,
            "baseline_ms": round(bare, 2),
        },
    ]


def main() -> None:
    print(f"document: {len(document().encode()):,} bytes, 1,000 steps")
    for r in results():
        verdict = "ok" if r["ok"] else "MISS"
        print(f"{r['name']}: {r['value']} {r['unit']} (goal <= {r['goal']} {r['unit']}) {verdict}")
        if "baseline_ms" in r:
            print(f"  bare interpreter baseline: {r['baseline_ms']} ms")


if __name__ == "__main__":
    main()
