"""Overhead of a managed ``services.http.request`` call over a bare httpx request (spec §4.1).

Both go to the same keep-alive loopback server in this process, interleaved one by one
so machine noise hits both alike. The managed call runs with a no-op ``emit`` (no
journal): this measures validation, events, redaction and response decoding only. The
engine-path figure (worker round trip and journal commit) is measured elsewhere.

Goal: managed p50 at most 1.5x the bare p50. Run: ``python bench/http_calls.py [requests]``.
"""

from __future__ import annotations

import os
import sys

# Run from a checkout without an install: the repository root comes first.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import asyncio
import contextlib
import json
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from woml_magic.services import CallScope, HttpService, StepCalls

GOAL_P50_RATIO = 1.5
BODY = json.dumps({"id": "cus_1", "email": "a@example.com", "tags": ["x", "y"]}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


async def _measure(url: str, n: int) -> tuple[list[float], list[float]]:
    scope = CallScope(
        run_id="bench",
        step_id="bench",
        attempt_number=1,
        step_calls=StepCalls(),
        emit=lambda event: None,
        now=lambda: 0.0,
        busy=contextlib.nullcontext,
    )
    service = HttpService()
    bare_times: list[float] = []
    managed_times: list[float] = []
    async with httpx.AsyncClient(trust_env=False) as bare:
        try:
            for i in range(n + 20):  # the first 20 of each warm up pools and caches
                t0 = time.perf_counter()
                response = await bare.get(url, headers={"Authorization": "Bearer x"})
                response.json()
                t1 = time.perf_counter()
                await service.request(
                    {"url": url, "headers": {"Authorization": "Bearer x"}}, None, scope
                )
                t2 = time.perf_counter()
                if i >= 20:
                    bare_times.append(t1 - t0)
                    managed_times.append(t2 - t1)
        finally:
            await service.aclose()
    return bare_times, managed_times


def results(n: int = 300) -> list[dict[str, Any]]:
    """Measure and return figures as ``{name, value, unit, goal, ok}`` dicts."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/customers/1"
        bare, managed = asyncio.run(_measure(url, n))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    out: list[dict[str, Any]] = []
    for label, q in (("p50", 0.5), ("p90", 0.9)):
        b, m = _percentile(bare, q) * 1000, _percentile(managed, q) * 1000
        out.append(
            {
                "name": f"bare httpx {label}",
                "value": round(b, 3),
                "unit": "ms",
                "goal": None,
                "ok": True,
            }
        )
        out.append(
            {
                "name": f"managed call {label}",
                "value": round(m, 3),
                "unit": "ms",
                "goal": None,
                "ok": True,
            }
        )
        ok = m / b <= GOAL_P50_RATIO if label == "p50" else True
        out.append(
            {
                "name": f"managed/bare {label}",
                "value": round(m / b, 3),
                "unit": "x",
                "goal": f"<= {GOAL_P50_RATIO}" if label == "p50" else None,
                "ok": ok,
            }
        )
    return out


def main() -> int:
    from figures import print_figures  # bench/ is the script's folder

    return print_figures(results(int(sys.argv[1]) if len(sys.argv) > 1 else 300), 22)

if __name__ == "__main__":
    sys.exit(main())
