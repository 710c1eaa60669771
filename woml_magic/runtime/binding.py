"""The QuickJS binding scripts run on, quickjs-ng, and the versions verified (spec §4.5).

The worker reads the binding's private ``Context`` struct to give contexts the prelude
as bytecode (``_bytecode.py``), which is safe only on releases whose layout was
checked: ``VERIFIED`` is that range, the one pyproject.toml pins
(``quickjs-ng>=0.17,<0.18``). The kernel looks the installed version up once
(``installed_version``, ≈ 11 ms for ``importlib.metadata``) and hands it to every
worker it starts, so no worker start pays for the lookup. This module imports nothing
but the standard library: both processes use it.

The worker process imports the binding's C extension, ``_quickjs``, not the
``quickjs`` package around it: the package's ``Context``, ``Object`` and
``JSException`` are the extension's own, and the rest of it (a thread-pool
``Function`` helper the worker never uses) imports ``concurrent.futures``, ≈ 20 ms of
every worker start and of every restart after a timeout or a cancel.
"""

from __future__ import annotations

import functools
import re
from typing import Final

DISTRIBUTION: Final = "quickjs-ng"
#: Releases whose ``Context`` layout was verified: from the first (included) to the
#: second (excluded), compared on their release numbers.
VERIFIED: Final = ((0, 17), (0, 18))


@functools.cache
def installed_version() -> str | None:
    """The full version of the installed quickjs-ng distribution (``0.17.0.2``), or
    None where it is not installed as a distribution."""
    import importlib.metadata  # ≈ 11 ms: only a kernel starting its first worker pays

    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def release(version: str) -> tuple[int, ...] | None:
    """The release numbers a version starts with (``0.17.0.2`` → ``(0, 17, 0, 2)``;
    ``0.18.0rc1`` → ``(0, 18, 0)``), or None when it starts with none."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return None if match is None else tuple(int(part) for part in match.group().split("."))


def unverified(version: str | None) -> str | None:
    """None if ``version`` lies in the verified range, else why it is not trusted."""
    low, high = VERIFIED
    allowed = (f"{DISTRIBUTION} >={'.'.join(map(str, low))},"
               f"<{'.'.join(map(str, high))}")
    if not version:
        return f"the installed {DISTRIBUTION} version is unknown; verified is {allowed}"
    numbers = release(version)
    if numbers is None or not low <= numbers < high:
        return f"{DISTRIBUTION} {version} is installed; its layout is verified for {allowed}"
    return None
