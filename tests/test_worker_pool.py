"""The warm script workers of a process (spec §4.5: "a warm worker process (started on
first use, reused across attempts and runs)"), and ``%load_ext woml_magic``, the first
use, starting one in the background so the first cell finds it warm (issue 21 item 6).
"""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from procs import alive

from woml_magic.errors import WomlRunError
from woml_magic.runtime import pool as pool_module
from woml_magic.runtime.pool import WorkerPool
from woml_magic.runtime.worker import ScriptWorker

ROOT = Path(__file__).resolve().parent.parent


def test_warm_up_keeps_one_started_worker_for_the_next_attempt() -> None:
    pool = WorkerPool()
    thread = pool.warm_up()
    assert thread is not None
    assert pool.warm_up() is None  # one is starting: not a second
    thread.join(60)
    (warm,) = pool.idle
    assert warm.pid is not None
    assert alive(warm.pid)
    assert pool.warm_up() is None  # one is idle

    async def attempt() -> int | None:
        async with pool.worker() as worker:
            return worker.pid

    assert asyncio.run(attempt()) == warm.pid  # the attempt got the warm one
    pool.kill_all()
    assert not alive(warm.pid)
    assert pool.warm_up() is None  # a closed pool starts nothing


def test_an_attempt_during_the_warm_up_waits_for_its_worker_instead_of_starting_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first cell straight after ``%load_ext`` (issue 21 item 6): the warm-up is still
    starting its worker, so the attempt takes that one when it is up; one process, not
    two starting side by side."""
    from woml_magic.runtime.transport import ChildProcess

    started: list[float] = []

    def slow_start() -> ChildProcess:
        started.append(time.monotonic())
        time.sleep(0.3)  # a start on a busy machine
        return ChildProcess()

    monkeypatch.setattr(
        pool_module, "ScriptWorker", functools.partial(ScriptWorker, start_process=slow_start)
    )
    pool = WorkerPool()
    thread = pool.warm_up()
    assert thread is not None

    async def attempt() -> int | None:
        async with pool.worker() as worker:
            return worker.pid

    try:
        pid = asyncio.run(attempt())  # at once: the warm-up is still starting
        thread.join(60)
        assert pid is not None, "the attempt got a new, unstarted worker"
        assert len(started) == 1, "a second worker was started beside the warm-up's"
        assert [w.pid for w in pool.idle] == [pid]  # given back, warm for the next
    finally:
        pool.kill_all()


def test_a_worker_that_cannot_start_is_reported_by_the_first_attempt_not_the_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> object:
        raise OSError("no such program: quickjs")

    monkeypatch.setattr(
        pool_module, "ScriptWorker", functools.partial(ScriptWorker, start_process=broken)
    )
    pool = WorkerPool()
    thread = pool.warm_up()
    assert thread is not None
    thread.join(60)
    assert pool.idle == ()

    async def attempt() -> None:
        async with pool.worker() as worker:
            await worker.start()

    with pytest.raises(WomlRunError, match="the script worker could not start: no such program"):
        asyncio.run(attempt())


#: A fresh Python process with a real IPython shell: ``%load_ext``, then what the test
#: asks (``SCENARIO``); it prints the warm worker's pid when it has one.
SCRIPT = textwrap.dedent(
    """
    import sys, time
    from IPython.testing.globalipapp import start_ipython
    from woml_magic.api import default_pool
    ip = start_ipython()
    ip.run_line_magic("load_ext", "woml_magic")
    if sys.argv[1] == "exit-at-once":
        sys.exit(0)
    deadline = time.monotonic() + 60
    while not default_pool().idle and time.monotonic() < deadline:
        time.sleep(0.05)
    (warm,) = default_pool().idle
    print("warm", warm.pid, flush=True)
    ip.run_line_magic("config", 'Woml.journal = ":memory:"')
    ip.run_cell_magic("woml", "--simulate", '<step id="a"><script>return 1;</script></step>')
    print("after", *[w.pid for w in default_pool().idle], flush=True)
    """
)


def woml_workers_of(parent: int) -> list[int]:
    """Live processes that say they are a woml worker of ``parent`` (its environment:
    ``transport.ChildProcess`` sets ``WOML_PARENT_PID``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"WOML_PARENT_PID={parent}".encode() in env and alive(int(entry)):
            found.append(int(entry))
    return found


def run_shell(scenario: str) -> tuple[int, str]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, scenario],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    return proc.pid, out


def gone(parent: int, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while woml_workers_of(parent) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not woml_workers_of(parent)


def test_load_ext_starts_a_worker_the_first_cell_uses_and_exit_leaves_none() -> None:
    pid, out = run_shell("cell")
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    warm = int(lines["warm"])
    assert warm in [int(p) for p in lines["after"].split()]  # the cell used it, kept it
    assert gone(pid)
    assert not alive(warm)


def test_a_kernel_that_exits_right_after_load_ext_leaves_no_worker() -> None:
    pid, _out = run_shell("exit-at-once")
    assert gone(pid)
