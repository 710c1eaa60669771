"""Which headers are secret, and how they are shown (spec §4.1).

Sensitive headers are shown and journaled as ``•••``. One list, used by the HTTP
service before it records a call and by the journal before it writes one; this
module imports nothing heavy, so reading a journal does not load httpx.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

#: spec §4.1: shown and journaled as ``•••``, plus any configured name.
DEFAULT_REDACTED = ("authorization", "cookie", "set-cookie", "proxy-authorization", "x-api-key")
REDACTED = "•••"

V = TypeVar("V")


def redact_headers(headers: Mapping[str, V], redact: Iterable[str]) -> dict[str, V | str]:
    """Copy ``headers`` with sensitive values replaced by ``•••`` (spec §4.1).

    Names compare case-insensitively; names keep their spelling.
    """
    hidden = {name.lower() for name in redact}
    return {k: (REDACTED if k.lower() in hidden else v) for k, v in headers.items()}


def redact_names(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The header names to redact: spec §4.1's defaults plus ``extra``, lower-cased,
    each once, in that order. The HTTP service and the journal both use this one list."""
    return tuple(dict.fromkeys([*DEFAULT_REDACTED, *(name.lower() for name in extra)]))
