"""The host allow-list of the ``http_allow`` setting (spec §4.1, our decision): which
hosts scripts may call through ``services.http``, decided before a byte leaves; a host
outside it is a ``NetworkError`` with ``blocked: true`` and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx


class HostAllowList:
    """The ``http_allow`` setting: which hosts scripts may call (spec §4.1, our decision).

    Entries are host names or IP addresses (``api.example.com``, ``127.0.0.1``), a
    ``*.`` wildcard for any subdomain (``*.example.com``, which does not match
    ``example.com`` itself), or ``host:port`` to allow a single port. Matching ignores
    case. ``None`` allows every host.
    """

    def __init__(self, entries: Iterable[str] | None) -> None:
        self.entries = None if entries is None else tuple(e.strip().lower() for e in entries)

    def allows(self, url: httpx.URL) -> bool:
        if self.entries is None:
            return True
        host, port = url.host.lower(), url.port or (443 if url.scheme == "https" else 80)
        for entry in self.entries:
            pattern, _, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
            if entry_port and int(entry_port) != port:
                continue
            pattern = pattern.strip("[]")
            if pattern.startswith("*."):
                if host.endswith(pattern[1:]):
                    return True
            elif host == pattern:
                return True
        return False


def _has_port(entry: str) -> bool:
    # "::1" is an IPv6 address, "[::1]:8080" and "host:8080" carry a port.
    head, sep, tail = entry.rpartition(":")
    return bool(sep) and tail.isdigit() and (":" not in head or head.endswith("]"))
