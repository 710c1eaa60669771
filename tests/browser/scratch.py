"""The small notebooks the browser tests write beside copies of the teaching notebooks."""

# nbformat ships no type information.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

from .servers import REPO

TEACHING = sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))
#: Copies of the teaching notebooks that ask for the ipykernel 6 kernelspec.
IPYKERNEL6_PREFIX = "ipykernel6-"

#: spec §3.1's example: retry="10", exponential from 1s, capped at 30s; always throws.
#: Its nine waits are 1, 2, 4, 8, 16, 30, 30, 30, 30 s.
SPEC_RUN_ID = "spec-example"
SPEC_CELL = f"""%%woml --simulate --run-id {SPEC_RUN_ID}
<step id="poll" retry="10" retry-backoff="exponential" retry-delay="1s" retry-max-delay="30s">
  <script>
    throw new Error("not ready");
  </script>
</step>"""
SPEC_WAITS = [1, 2, 4, 8, 16, 30, 30, 30, 30]

SETUP = '%load_ext woml_magic\n%config Woml.journal = ":memory:"'

#: A real-clock background run: two thrown attempts 1s apart, then a third that
#: sleeps until it is cancelled (the live widget with its Cancel button).
LIVE_RUN_ID = "browser-1"
LIVE_CELL = f"""%%woml --background --run-id {LIVE_RUN_ID}
<step id="charge" retry="5" retry-delay="1s" timeout="5m">
  <script>
    console.log("attempt " + attempt.number);
    if (attempt.number < 3) throw new Error("the API is busy");
    await services.sleep("2m");
    return {{charged: true}};
  </script>
</step>"""

#: For the export: a finished foreground run and a background run cancelled later,
#: each with a pinned run id so the keys shown are known (spec §3.5).
EXPORT_BG_RUN_ID = "export-bg"
EXPORT_CELLS = [
    SETUP,
    SPEC_CELL,
    f"""%%woml --background --run-id {EXPORT_BG_RUN_ID}
<step id="long" retry="3" timeout="2h">
  <script>
    await services.sleep("1h");
    return "done";
  </script>
</step>""",
    "import time\ntime.sleep(1.0)",
    f"%woml cancel {EXPORT_BG_RUN_ID}",
    "time.sleep(0.5)  # the cancelled run's last display update",
]
EXPORT_KEYS = {(SPEC_RUN_ID, "poll"), (EXPORT_BG_RUN_ID, "long")}

#: spec §10.4: two runs of one step, fixed and exponential backoff, compared on one
#: axis by %woml compare (the runs from the session's journal, as %woml show reads them).
COMPARE_RUN_IDS = ("compare-fixed", "compare-expo")
COMPARE_LABELS = ("fixed 1s", "exponential 1s")
COMPARE_STEP = """<step id="charge" retry="5" retry-backoff="{backoff}" retry-delay="1s">
  <script>
    if (attempt.number < 5) throw new Error("card network busy");
    return attempt.number;
  </script>
</step>"""
COMPARE_CELLS = [
    SETUP,
    f"%%woml --simulate --run-id {COMPARE_RUN_IDS[0]} --out fixed\n"
    + COMPARE_STEP.format(backoff="fixed"),
    f"%%woml --simulate --run-id {COMPARE_RUN_IDS[1]} --out expo\n"
    + COMPARE_STEP.format(backoff="exponential"),
    f"%woml compare {' '.join(COMPARE_RUN_IDS)} --labels '{','.join(COMPARE_LABELS)}'",
]

#: Notebooks that must make the Run All check fail (the check checks itself).
#: The wedge is issue 11's: a cell that re-enters the kernel's running loop while
#: cells are queued behind it; the kernel then shows idle with cells at [*].
WEDGE = [
    "print('before')",
    "import asyncio\n\nimport nest_asyncio\n\nloop = asyncio.get_event_loop()\n"
    "nest_asyncio.apply(loop)\nloop.run_until_complete(asyncio.sleep(0.1))",
    "print('after')",
]
#: A cell that never ends: the kernel is busy, so only the timeout catches it.
ENDLESS = ["print('before')", "import time\n\nwhile True:\n    time.sleep(1)", "print('after')"]
#: A cell that raises: Run All stops there; the later cell never gets a count.
RAISES = ["print('before')", "raise ValueError('boom')", "print('after')"]
#: asyncio noise on stderr without an error output (what issue 11 saw first).
NOISY = [
    "import sys\nprint('Exception in callback Task.__step()', file=sys.stderr)",
]

SCRATCH = {
    "spec-example.ipynb": [SETUP, SPEC_CELL],
    "live.ipynb": [SETUP, LIVE_CELL],
    "compare.ipynb": COMPARE_CELLS,
    "export.ipynb": EXPORT_CELLS,
    "wedge.ipynb": WEDGE,
    "endless.ipynb": ENDLESS,
    "raises.ipynb": RAISES,
    "noisy.ipynb": NOISY,
}


def write_notebook(path: Path, sources: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, path)
    return path


def populate(root: Path) -> Path:
    """Copies of the four teaching notebooks and the scratch notebooks in ``root``.

    The teaching notebooks need nothing beside them: they start the demo API on
    127.0.0.1 themselves and journal to memory or to a temporary folder (notebook 04).
    """
    root.mkdir(parents=True, exist_ok=True)
    for nb in TEACHING:
        shutil.copy(nb, root / nb.name)
        # The same notebook on the ipykernel 6 kernelspec (servers.IPYKERNEL6).
        on6 = nbformat.read(nb, as_version=4)
        on6.metadata["kernelspec"] = {"name": "woml-ipykernel6", "language": "python",
                                      "display_name": "Python 3 (ipykernel 6)"}
        nbformat.write(on6, root / f"{IPYKERNEL6_PREFIX}{nb.name}")
    for name, sources in SCRATCH.items():
        write_notebook(root / name, sources)
    return root
