"""The demo API's idempotency contract (spec §8; IETF Idempotency-Key draft; Stripe).

- ``parse_key``: the ``Idempotency-Key`` header, bare (``abc``) or as a structured-field
  string (``"abc"``, RFC 8941 §3.3.3); both mean ``abc``.
- ``fingerprint``: sha256 of the body's canonical JSON, so key order and whitespace do
  not make two equal bodies differ.
- ``IdempotencyStore``: the responses stored under (key, method, path), in flight or
  complete, expiring ``ttl`` seconds after they were created on an injectable clock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .problems import Response, fail

#: IETF draft and Stripe both cap keys at 255 characters.
MAX_KEY_LENGTH = 255

StoreKey = tuple[str, str, str]
"""(idempotency key, method, path): the scope of one stored response (spec §8)."""


def parse_key(values: list[str]) -> str | None:
    """The idempotency key carried by the ``Idempotency-Key`` header values, or ``None``.

    Raises ``ProblemError`` (400) when the header is repeated, empty, longer than 255
    characters, not printable ASCII, or a malformed structured-field string (spec §8).
    """
    if not values:
        return None
    if len(values) > 1:
        raise fail(
            400,
            f"Idempotency-Key was sent {len(values)} times; send it once per request.",
            slug="invalid-idempotency-key",
        )
    raw = values[0].strip(" \t")
    key = _unquote(raw) if raw.startswith('"') else raw
    if not key:
        raise fail(
            400,
            "Idempotency-Key is empty; send 1 to 255 printable ASCII characters.",
            slug="invalid-idempotency-key",
        )
    if len(key) > MAX_KEY_LENGTH:
        raise fail(
            400,
            f"Idempotency-Key is {len(key)} characters long; at most {MAX_KEY_LENGTH} are allowed.",
            slug="invalid-idempotency-key",
        )
    bad = next((c for c in key if not " " <= c <= "~"), None)
    if bad is not None:
        raise fail(
            400,
            f"Idempotency-Key contains {bad!r}; only printable ASCII characters are allowed.",
            slug="invalid-idempotency-key",
        )
    return key


def _unquote(raw: str) -> str:
    """The content of an RFC 8941 sf-string: ``"`` … ``"`` with ``\\"`` and ``\\\\``."""
    out: list[str] = []
    i = 1
    while i < len(raw):
        char = raw[i]
        if char == "\\" and i + 1 < len(raw) and raw[i + 1] in '"\\':
            out.append(raw[i + 1])
            i += 2
        elif char == "\\":
            break
        elif char == '"':
            if i != len(raw) - 1:
                break
            return "".join(out)
        else:
            out.append(char)
            i += 1
    raise fail(
        400,
        f'Idempotency-Key {raw!r} is not a valid quoted string; send abc or "abc" '
        '(inside quotes only \\" and \\\\ are escapes).',
        slug="invalid-idempotency-key",
    )


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: equal JSON values give equal bytes."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def fingerprint(value: Any) -> str:
    """sha256 hex of ``canonical_json(value)``: the request body's identity (spec §8)."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


@dataclass
class Entry:
    """One key's record: in flight while ``response`` is ``None``, then complete."""

    fingerprint: str
    created: float
    response: Response | None = None


class IdempotencyStore:
    """Responses stored under (key, method, path) with a TTL (spec §8).

    Not thread-safe by itself: ``DemoAPI`` calls it under its lock. An entry created at
    ``t`` expires at ``t + ttl`` on ``clock``: a repeat at or after that instant finds
    nothing and executes afresh. Entries still in flight never expire (their request
    has not answered yet).
    """

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self.clock = clock
        self._entries: dict[StoreKey, Entry] = {}

    def get(self, key: StoreKey) -> Entry | None:
        """The live entry under ``key``, dropping it first if it has expired."""
        entry = self._entries.get(key)
        if entry is not None and entry.response is not None and self._expired(entry):
            del self._entries[key]
            return None
        return entry

    def begin(self, key: StoreKey, body_fingerprint: str) -> Entry:
        """Record that execution under ``key`` has begun (the key is now in flight)."""
        entry = Entry(body_fingerprint, self.clock())
        self._entries[key] = entry
        return entry

    def complete(self, key: StoreKey, entry: Entry, response: Response) -> None:
        """Store ``response`` in ``entry`` if it is still the one under ``key``.

        After ``DemoAPI.reset()`` the entry is gone; its late response is not stored.
        """
        if self._entries.get(key) is entry:
            entry.response = response

    def clear(self) -> None:
        """Forget every key."""
        self._entries.clear()

    def _expired(self, entry: Entry) -> bool:
        return self.clock() >= entry.created + self.ttl
