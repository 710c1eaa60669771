"""A kernel stand-in that tests/test_journal_races.py races against another (spec §5.2).

Reads one JSON command per line on stdin, waits until the command's ``go`` instant
(unix time, the same for both racers), runs or resumes the run on the journal file,
and prints one JSON line:

    {"pid": P, "status": S, "emitted": N}   the call returned a Run (N events emitted)
    {"pid": P, "error": "WomlRunError", "message": "..."}   it was refused

Commands: ``{"op": "run" | "resume", "run_id": ID, "journal": PATH, "doc": TEXT,
"go": T}``. An empty line ends the process.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import woml_magic as wm
from woml_magic.errors import WomlError
from woml_magic.events import Event


def main() -> int:
    for line in sys.stdin:
        if not line.strip():
            break
        cmd = json.loads(line)
        emitted: list[Event] = []
        options: dict[str, object] = {
            "journal": cmd["journal"],
            "clock": "real",
            "sinks": [emitted.append],
        }
        if cmd["op"] == "run":
            options["run_id"] = cmd["run_id"]
        else:
            options["resume"] = cmd["run_id"]
            options["retry_interrupted"] = True
        time.sleep(max(0.0, cmd["go"] - time.time()))
        try:
            run = wm.run(cmd["doc"], **options)  # type: ignore[arg-type]
        except WomlError as exc:
            reply = {"pid": os.getpid(), "error": type(exc).__name__, "message": str(exc)}
        else:
            reply = {"pid": os.getpid(), "status": run.status, "emitted": len(emitted)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
