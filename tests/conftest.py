"""Shared fixtures: every test talks only to 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest


def child_pids() -> set[int]:
    """Live child processes of this process (read from /proc; no psutil needed)."""
    me = str(os.getpid())
    kids: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":
            kids.add(int(entry))
    return kids


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")




@pytest.fixture(autouse=True)
def _close_leftover_event_loop() -> Iterator[None]:
    """Close an event loop a test left set as current.

    A test that made a loop current and left it open would otherwise keep it until
    garbage collection warns about it (``filterwarnings = error``).
    """
    yield
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    loop = getattr(local, "_loop", None)
    if isinstance(loop, asyncio.AbstractEventLoop) and not loop.is_running():
        if not loop.is_closed():
            loop.close()
        asyncio.set_event_loop(None)
