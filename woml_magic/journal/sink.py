"""Appending to the journal: the ``EventSink`` side (spec §5.2).

Each event becomes one row, committed before ``append`` returns, so ``attempt-started``
and ``call-started`` are durable before the script or the request proceeds. Sensitive
header values are replaced by ``•••`` before the row is encoded (spec §4.1): the
engine redacts before it emits, and the journal redacts again so no pipeline bug can
leak a secret to disk.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Set
from dataclasses import replace
from typing import Any

from ..errors import WomlJournalError
from ..events import CallFinished, CallStarted, Event
from ..redaction import REDACTED, redact_headers
from .storage import Storage

_INSERT = "INSERT INTO events(run_id, kind, at, wall, data) VALUES (?, ?, ?, ?, ?)"


def append(storage: Storage, event: Event, redact: Set[str]) -> None:
    """Append one event, its ``redact`` headers hidden, and commit it (spec §5.2).

    ``redact`` holds lower-case header names (``redaction.redact_names``).
    """
    data = encode(event, redact)
    try:
        with storage.lock:
            storage.connection.execute(
                _INSERT, (event.run_id, event.kind, float(event.at), time.time(), data)
            )
    except sqlite3.Error as exc:  # `Storage.guard`, inline: this runs for every event
        raise storage.error(f"append {event.kind} of run {event.run_id!r} to", exc) from exc


def encode(event: Event, redact: Set[str]) -> str:
    """The ``data`` column of ``event``: the JSON of its redacted ``to_dict()``."""
    record = redacted(event, redact).to_dict()
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise WomlJournalError(
            f"cannot journal {event.kind} of run {event.run_id!r}: {exc}; "
            "events carry JSON values only (null, booleans, finite numbers, "
            "strings, arrays, objects)"
        ) from exc


def redacted(event: Event, redact: Set[str]) -> Event:
    """``event``, or a copy whose request or response headers in ``redact`` read ``•••``."""
    if isinstance(event, CallStarted):
        headers = _redact_headers(event.request_headers, redact)
        return event if headers is None else replace(event, request_headers=headers)
    if isinstance(event, CallFinished) and isinstance(event.response, dict):
        inner = event.response.get("headers")
        headers = _redact_headers(inner, redact) if isinstance(inner, dict) else None
        if headers is not None:
            return replace(event, response={**event.response, "headers": headers})
    return event


def _redact_headers(headers: Mapping[str, Any], redact: Set[str]) -> dict[str, Any] | None:
    """A copy with sensitive values replaced, or None when nothing needs it."""
    if not any(k.lower() in redact and v != REDACTED for k, v in headers.items()):
        return None
    return redact_headers(headers, redact)
