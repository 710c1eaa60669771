"""The attempts one worker process holds, in the order it runs them (spec §4.5).

The child runs one attempt at a time and reads its next command only when the attempt
before has ended, so a worker may send attempts ahead (``ScriptWorker(depth=…)``): the
next command then waits in the pipe instead of the child waiting for the kernel. The
lab does this for scripts that cannot reach ``services`` (``lab.labclock``), whose
attempts never wait on the kernel: a script that waits for a call would hold up the
attempts behind it.

A ``Line`` is the process's inbox (``ChildProcess.attach``). What the child says goes
to the attempt it names; the first attempt of the line is the one the child runs, and
its ``done`` starts the next. An attempt behind the first has not started: its
deadline is armed only when it does (``Slot.begin``), so an attempt ahead that spins
until it is killed does not use up the time of those behind it; and when the process
goes (killed, died, broke the protocol) they have run nothing, so each is told to send
itself again to a fresh process (``RESEND``) — a misbehaving script ends its own
attempt only. One whose task was cancelled before it started is ``abandoned``: the
process is replaced when its turn comes, and its lines are dropped.
"""

from __future__ import annotations

import asyncio
import collections
import signal
from collections.abc import Callable
from typing import Final

from .protocol import DONE
from .transport import EXITED, Inbox, Received

#: The inbox event that sends an attempt that has not started to a fresh process.
RESEND: Final = "resend"
_RESEND_EVENT: Final = Received({"type": RESEND})
_KILLED_EVENT: Final = Received({"type": EXITED, "returncode": -signal.SIGKILL})
#: A deadline as ``run_attempt`` takes it: armed, or how to arm it when the attempt starts.
Deadline = asyncio.Future[None] | Callable[[], asyncio.Future[None]] | None


class Slot:
    """One attempt sent (or about to be sent) to the worker process."""

    __slots__ = ("_arm", "_owned", "_ring", "abandoned", "deadline", "id", "inbox", "queued",
                 "started")

    def __init__(self, attempt_id: int, inbox: Inbox, deadline: Deadline,
                 ring: Callable[[asyncio.Future[None]], None]) -> None:
        self.id = attempt_id
        self.inbox = inbox
        self.started = False
        self.abandoned = False
        self.queued = False  # in its process's line (``Line``)
        self._ring = ring
        self._arm: Callable[[], asyncio.Future[None]] | None = None
        self._owned = False
        self.deadline: asyncio.Future[None] | None = None
        if isinstance(deadline, asyncio.Future):
            self._watch(deadline)
        elif deadline is not None:
            self._arm = deadline

    def _watch(self, deadline: asyncio.Future[None]) -> None:
        self.deadline = deadline
        deadline.add_done_callback(self._ring)

    def arm(self) -> None:
        """Start the attempt's deadline (spec §3.2), unless it runs already."""
        if self._arm is not None and self.deadline is None:
            self._owned = True
            self._watch(self._arm())

    def begin(self) -> None:
        """The child runs this attempt from now on: its deadline starts."""
        self.started = True
        self.arm()

    def end(self) -> None:
        """The attempt is over: its deadline rings nothing any more (and is called off
        if the slot armed it)."""
        deadline = self.deadline
        if deadline is not None:
            deadline.remove_done_callback(self._ring)
            if self._owned:
                deadline.cancel()


class Line:
    """The attempts sent to one process, first the one it runs: the process's inbox.

    ``on_abandoned_turn`` is called when an attempt abandoned before it started comes to
    the front (the worker replaces the process: nobody waits for what it does).
    """

    def __init__(self, on_abandoned_turn: Callable[[], None]) -> None:
        self._slots: collections.deque[Slot] = collections.deque()
        self._on_abandoned_turn = on_abandoned_turn

    def __len__(self) -> int:
        return len(self._slots)

    def first(self) -> Slot | None:
        return self._slots[0] if self._slots else None

    def add(self, slot: Slot) -> None:
        """``slot``'s command is being sent: it runs once those ahead have ended."""
        self._slots.append(slot)
        slot.queued = True
        if len(self._slots) == 1:
            slot.begin()

    def remove(self, slot: Slot) -> None:
        """``slot`` has ended (or left the process); the next one's turn if it was first."""
        if self._slots and self._slots[0] is slot:
            self._advance()
        elif slot.queued:  # not if it left the line already (its ``done`` came)
            slot.queued = False
            self._slots.remove(slot)

    def _advance(self) -> None:
        self._slots.popleft().queued = False
        following = self.first()
        if following is None:
            return
        if following.abandoned:
            self._on_abandoned_turn()
        else:
            following.begin()

    def requeue(self, ending: Slot | None = None) -> None:
        """The process is gone: the line is empty, every attempt that had not started is
        sent again to a fresh process, and one that had is told its process was killed
        — unless it is ``ending``, the attempt that killed it."""
        slots, self._slots = self._slots, collections.deque()
        for slot in slots:
            slot.queued = False
            if slot is ending or slot.abandoned:
                continue
            slot.inbox.put_nowait(_RESEND_EVENT if not slot.started else _KILLED_EVENT)

    def put_nowait(self, item: Received) -> None:
        """Deliver one thing from the process (its inbox, ``ChildProcess.attach``)."""
        first = self.first()
        if first is None:
            return  # nothing is waiting: a line between attempts (the transport's fault)
        ident = item.message.get("id")
        if ident is None:
            # The transport's own event (the process has gone, or broke the protocol):
            # the running attempt's end; it replaces the process, and those behind it
            # are sent again (``requeue``).
            first.inbox.put_nowait(item)
            return
        if ident != first.id:
            # Behind the first, nothing has run; an id out of turn is the running
            # attempt's fault (it sees the id, which is not its own).
            for slot in self._slots:
                if slot.id == ident and slot.abandoned:
                    return
            first.inbox.put_nowait(item)
            return
        first.inbox.put_nowait(item)
        if item.message.get("type") == DONE:
            self._advance()
