"""Processes as /proc shows them (Linux; no psutil needed): which run, whose child
each is. Zombies nobody reaped count as ended."""

from __future__ import annotations

import os


def live_parents() -> dict[int, int]:
    """Every live process's parent pid, by pid."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    return parents


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> set[int]:
    """Live child processes of ``pid``."""
    return {child for child, parent in live_parents().items() if parent == pid}


def descendants(pid: int) -> set[int]:
    """Live descendants of ``pid`` (children, their children, …)."""
    parents = live_parents()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items()
                    if parent in frontier and child not in found}
        found |= frontier
    return found
