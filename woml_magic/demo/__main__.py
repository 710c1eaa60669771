"""``python -m woml_magic.demo``: serve the demo API from the command line (spec §8).

Prints the URL on the first line of stdout, then one line per request; Ctrl-C
(SIGINT) or SIGTERM stops it cleanly with exit status 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from .api import DemoAPI, DemoAPIError


def build_parser() -> argparse.ArgumentParser:
    """The command line: --port, --require-keys, --ttl, --quiet."""
    parser = argparse.ArgumentParser(
        prog="python -m woml_magic.demo",
        description="Serve the woml-magic demo API (customers, charges, idempotency keys, "
        "injectable faults) on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument(
        "--require-keys", action="store_true", help="refuse POSTs without an Idempotency-Key"
    )
    parser.add_argument(
        "--ttl", type=float, default=24 * 3600, help="seconds a stored key lives (default 24h)"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print one line per request")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the server until SIGINT or SIGTERM; returns the exit status."""
    args = build_parser().parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    log = None if args.quiet else (lambda line: print(line, flush=True))
    try:
        api = DemoAPI(require_keys=args.require_keys, ttl=args.ttl, port=args.port, log=log)
        api.start()
    except (DemoAPIError, OSError) as error:
        print(f"python -m woml_magic.demo: {error}", file=sys.stderr)
        return 2
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"woml demo API listening on {api.url} (Ctrl-C stops it)", flush=True)
        # wait() with a timeout lets the main thread run the signal handler promptly.
        while not stop.wait(0.5):
            pass
    finally:
        api.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("woml demo API stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
