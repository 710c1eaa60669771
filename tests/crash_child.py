"""A kernel stand-in that tests/test_resume.py kills with SIGKILL (spec §5.2, §5.3).

Runs one workflow on the real clock with a journal file, exactly as a notebook kernel
would, and prints one JSON line per event *after* the journal's ``append`` returned
(the printer is the sink after the journal), so the parent can check that no event
the child saw committed is missing from the journal after the kill.

    python tests/crash_child.py '{"journal": PATH, "run_id": ID, "doc": TEXT,
                                  "payload": {...}, "pause_after_step": STEP | null}'

Lines on stdout:

- ``{"event": i, "kind": K, "step": S, "number": N, "at": T, "wall": W}`` per event;
- ``{"paused": STEP}`` when ``pause_after_step``'s ``step-finished`` is journaled: the
  child then sleeps inside the sink, i.e. *between steps*, until it is killed;
- ``{"done": STATUS}`` when the run ends.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import woml_magic as wm
from woml_magic.events import Event, StepFinished

#: How long a paused child sleeps in its sink: far longer than any test waits for it.
PAUSE_SECONDS = 600.0


def _say(record: dict[str, Any]) -> None:
    # One write per line, flushed at once: what reached the pipe survives SIGKILL.
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def main() -> int:
    spec = json.loads(sys.argv[1])
    pause_after = spec.get("pause_after_step")
    counter = 0

    def printer(event: Event) -> None:
        nonlocal counter
        _say({
            "event": counter,
            "kind": event.kind,
            "step": getattr(event, "step_id", None),
            "number": getattr(event, "number", None),
            "at": event.at,
            "wall": time.time(),
        })
        counter += 1
        if isinstance(event, StepFinished) and event.step_id == pause_after:
            _say({"paused": event.step_id})
            time.sleep(PAUSE_SECONDS)

    run = wm.run(
        spec["doc"],
        payload=spec.get("payload"),
        clock=spec.get("clock", "real"),
        run_id=spec["run_id"],
        journal=spec["journal"],
        sinks=[printer],
    )
    _say({"done": run.status})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
