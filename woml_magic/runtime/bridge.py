"""The ``services.*`` calls of one attempt, performed in the kernel (spec §4.1, §4.5).

Each call a script makes comes out of the worker as a ``call`` message; the kernel
performs it (``ServiceCall``) while the attempt goes on and sends its outcome back as
a ``reply``. A call the kernel cannot answer (its code failed, or answered with a
value that is not JSON) is a ``bridge-failed`` event in the attempt's inbox: the
attempt ends ``crash`` (spec §3.2).
"""

from __future__ import annotations

import asyncio

from woml_magic.errors import ServiceRejection
from woml_magic.limits import json_depth

from .attempt import AttemptRequest, ServiceCall
from .protocol import CallMessage, ReplyError, ReplyOk
from .report import BRIDGE_FAILED
from .transport import ChildProcess, Inbox, Received

#: The most bytes of arguments of ``services`` calls one attempt may have in flight.
MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024


class ServiceBridge:
    """The calls of one attempt: checked, performed concurrently, answered, and
    cancelled by ``aclose`` when the attempt ends."""

    def __init__(
        self, process: ChildProcess, attempt_id: int, services: ServiceCall,
        request: AttemptRequest, inbox: Inbox,
    ) -> None:
        self._process = process
        self._attempt_id = attempt_id
        self._services = services
        self._request = request
        self._inbox = inbox
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen: set[int] = set()
        self._in_flight = 0  # bytes of arguments of calls not yet answered

    def call(self, message: CallMessage, size: int) -> str | None:
        """Start performing one call whose line was ``size`` bytes; a call past the
        in-flight budget is refused to the script instead. Returns what is wrong with a
        call the worker should never have sent, else None."""
        call = message["call"]
        limit = self._request.limits.max_json_depth
        if call in self._seen or json_depth(message["args"], limit) > limit:
            return "a services call that breaks the worker's own checks"
        self._seen.add(call)
        if self._in_flight + size > MAX_IN_FLIGHT_BYTES:
            self._process.send(self._refusal(call))
            return None
        self._in_flight += size
        task = asyncio.get_running_loop().create_task(self._serve(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._release(size))
        return None

    def _release(self, size: int) -> None:
        self._in_flight -= size

    def _refusal(self, call: int) -> ReplyError:
        return ReplyError(
            op="reply", attempt=self._attempt_id, call=call, ok=False,
            name="RangeError",
            message=f"too many services calls in flight: their arguments pass "
                    f"{MAX_IN_FLIGHT_BYTES} bytes; await some before making more",
            props={}, nowMs=self._request.now_ms(),
        )

    async def _serve(self, message: CallMessage) -> None:
        """Perform one call in the kernel and send its outcome back."""
        name = str(message["service"])
        call, attempt_id, now_ms = message["call"], self._attempt_id, self._request.now_ms
        reply: ReplyOk | ReplyError
        try:
            value = await self._services(name, message["args"])
            reply = ReplyOk(op="reply", attempt=attempt_id, call=call, ok=True,
                            value=value, nowMs=now_ms())
        except ServiceRejection as rejection:
            reply = ReplyError(op="reply", attempt=attempt_id, call=call, ok=False,
                               name=rejection.name, message=rejection.message,
                               props=rejection.props, nowMs=now_ms())
        except Exception as error:  # becomes the attempt's crash (spec §3.2)
            self._failed(f"services.{name} failed inside the kernel: "
                         f"{type(error).__name__}: {error}")
            return
        try:
            self._process.send(reply)
        except (TypeError, ValueError, RecursionError) as error:
            self._failed(f"services.{name} answered with a value that is not JSON: {error}")

    def _failed(self, message: str) -> None:
        self._inbox.put_nowait(Received({"type": BRIDGE_FAILED, "message": message}))

    async def aclose(self) -> None:
        """Cancel the calls still in flight and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
