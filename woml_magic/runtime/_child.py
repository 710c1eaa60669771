"""The script worker process: runs scripts in QuickJS, one attempt at a time (spec §4.5).

The kernel starts it (``transport.py``) with stand-ins for the ``woml_magic`` packages,
so it imports only the runtime's child-side modules: ``_channel.py`` (its end of the
pipes), ``_contexts.py`` (fresh contexts, the prelude, ``_bytecode.py``), ``_runner.py``
(the ``run`` and ``check`` commands) and the shared ``protocol.py`` and ``wrapper.py``.

The process never dies of script misbehaviour: everything is caught and reported; the
parent kills it for timeouts and cancellation. It exits when stdin closes, on an
``exit`` command, or when its parent dies.
"""

from __future__ import annotations

import signal
import sys
from typing import cast

from ._bytecode import Bytecode, BytecodeUnavailable
from ._channel import Channel, die_with_parent
from ._contexts import Contexts
from ._runner import AttemptRunner, check
from .binding import installed_version
from .protocol import CHECK, EXIT, RUN, CheckCommand, ReadyMessage, RunCommand


def main(quickjs_version: str | None = None) -> None:
    """Serve commands until stdin closes (spec §4.5).

    ``quickjs_version`` is the installed quickjs-ng's full version, as the kernel looked
    it up (``""`` when it found none); None looks it up here.
    """
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the kernel is the parent's to handle
    channel = Channel(sys.stdin.buffer, sys.stdout.buffer)
    contexts = _contexts(installed_version() if quickjs_version is None else quickjs_version)
    contexts.prepare_spare()
    if contexts.reason is None:
        channel.send(ReadyMessage(type="ready", prelude="bytecode"))
    else:
        channel.send(ReadyMessage(type="ready", prelude="source", reason=contexts.reason))
    while True:
        command = channel.receive()
        if command is None:
            return
        op = command.get("op")
        if op == RUN:
            AttemptRunner(channel, cast(RunCommand, command), contexts).run()
            contexts.router.current = None
            contexts.prepare_spare()
        elif op == CHECK:
            check(channel, cast(CheckCommand, command))
        elif op == EXIT:
            return


def _contexts(quickjs_version: str | None) -> Contexts:
    """This process's contexts: with the prelude as bytecode where that is safe."""
    try:
        return Contexts(Bytecode.open(quickjs_version or None))
    except BytecodeUnavailable as refusal:
        return Contexts(None, str(refusal))


if __name__ == "__main__":
    main()
