"""The worker process's end of the pipes to the kernel (spec §4.5).

Blocking newline-delimited JSON over the process's stdin and stdout (the protocol is
``protocol.py``; the kernel's end, served by its event loop, is ``transport.py``), and
the process's tie to its parent: it exits when the kernel is gone.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import threading
import time
from collections.abc import Mapping
from typing import Any, BinaryIO, cast

from woml_magic.outcomes import CRASH

from .protocol import FailedMessage, encode_line

PARENT_POLL_SECONDS = 0.25


class Channel:
    """Newline-delimited JSON over the process's stdin and stdout.

    Commands that arrive while the worker waits for a particular one (a
    ``context.steps`` answer) are kept, in order, for later ``receive`` calls.
    """

    def __init__(self, inp: BinaryIO, out: BinaryIO) -> None:
        self._in = inp
        self._out = out
        self._held: list[dict[str, Any]] = []

    def send(self, message: Mapping[str, Any]) -> None:
        """Write one message (ASCII JSON, one line); exit if the parent is gone."""
        try:
            line = encode_line(message)
        except (TypeError, ValueError):  # a bug here, never a script's doing: report it
            line = encode_line(FailedMessage(
                type="done", id=cast(int, message.get("id")), outcome=CRASH, name="InternalError",
                line=None, message="internal error in the script runtime: a message "
                                   "could not be encoded",
            ))
        try:
            self._out.write(line)
            self._out.flush()
        except (BrokenPipeError, OSError):
            os._exit(0)

    def _read(self) -> dict[str, Any] | None:
        while True:
            line = self._in.readline()
            if not line:
                return None
            if line.strip():
                message = json.loads(line)
                if isinstance(message, dict):
                    return message

    def receive(self) -> dict[str, Any] | None:
        """The next command, or None at end of input (the parent closed the pipe)."""
        if self._held:
            return self._held.pop(0)
        return self._read()

    def receive_matching(self, op: str, attempt: int) -> dict[str, Any] | None:
        """The next ``op`` command of ``attempt``; others are held for ``receive``."""
        for i, message in enumerate(self._held):
            if message.get("op") == op and message.get("attempt") == attempt:
                return self._held.pop(i)
        while True:
            received = self._read()
            if received is None:
                return None
            if received.get("op") == op and received.get("attempt") == attempt:
                return received
            self._held.append(received)


def die_with_parent() -> None:
    """Exit when the kernel process dies, even mid-``while (true) {}``.

    Linux's ``PR_SET_PDEATHSIG`` kills us at once, but it fires when the *thread* that
    started us ends, so the kernel asks for it (``WOML_PARENT_SIGNAL``) only from its
    main thread: a worker started from a helper thread (``wm.start`` in plain Python)
    must outlive that thread. A watcher thread covers every case within
    ``PARENT_POLL_SECONDS``: scripts run with the GIL released, so it runs even while
    a script spins.
    """
    expected = os.environ.get("WOML_PARENT_PID")
    if os.environ.get("WOML_PARENT_SIGNAL") == "1":
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if expected is None:
        return
    if str(os.getppid()) != expected:
        os._exit(0)
    threading.Thread(
        target=_watch_parent, args=(int(expected),), name="woml-parent-watch", daemon=True
    ).start()


def _watch_parent(pid: int) -> None:
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        if os.getppid() != pid:  # we were handed to another reaper: the kernel is gone
            os._exit(0)
