"""``ProviderRecording``: a payment provider as its cassettes recorded it (spec §10.4, §8).

    provider = ProviderRecording("cassettes/06-prototyping-an-integration")
    provider.url                            # where the recorded provider listened
    wm.run(doc, replay=provider.tape("keyed"), ...)   # one recorded run, replayed
    provider.records("charges")             # what the provider said it created
    provider.requests                       # what it received, as the cassettes keep it

For a notebook that runs offline from a shipped recording: a folder of cassettes, one
``NAME.jsonl`` a run, recorded against a live ``PaymentProvider`` (or ``DemoAPI``).
Nothing listens at ``url`` and nothing is opened: every fact comes from the files.
The cells that asked the live provider for its ledger ask this instead, with the same
names (``records``, ``requests``, ``reset``, ``stop``), and get what the provider
*answered* while the recording was made:

- ``tape(name)`` is the cassette of run ``name``; asking for it counts it as played, so
  its exchanges join the ledger, as the live provider's ledger grows as runs call it;
- ``records(collection)`` is the bodies of the 2xx answers to ``POST …/collection``
  that were not replays (``Idempotent-Replayed: true``): the objects the provider said
  it created, in the order it created them, answers a fault dropped included (the
  provider answered; the client did not hear it);
- ``requests`` is every recorded request with the status it got (``None``: no answer
  was recorded), its headers as kept: a cassette never holds a secret, so
  ``Authorization`` reads ``•••`` (spec §10.1);
- ``reset()`` forgets the played tapes, as the live provider's ``reset()`` empties its
  ledger; ``stop()`` has nothing to stop.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import CassetteError

__all__ = ["ProviderRecording", "RecordedRequest"]

#: A cassette of the folder: one recorded run, named by its file's stem.
SUFFIX = ".jsonl"


@dataclass(frozen=True)
class RecordedRequest:
    """One request a recorded provider received: ``path`` without the base URL,
    ``headers`` as the cassette keeps them (redacted ones ``•••``), ``status`` the answer
    recorded (``None`` when none arrived), ``replayed`` whether the answer said
    ``Idempotent-Replayed: true``, ``tape`` the run it belongs to and ``name`` the
    call's name in that run's script (``None``: unnamed)."""

    tape: str
    name: str | None
    method: str
    path: str
    headers: dict[str, str]
    status: int | None
    replayed: bool


class ProviderRecording:
    """A payment provider as a folder of cassettes recorded it (spec §10.4); see the
    module's docstring. Every cassette is read and checked when it is made."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        from ..services.cassette import Cassette  # its one reader; httpx on first use

        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise CassetteError(
                f"{self.folder}: no such folder of cassettes (looked in "
                f"{self.folder.resolve()}); a recording is a folder of NAME{SUFFIX} "
                "cassettes, one a recorded run: put it there, or pass its path"
            )
        self._tapes = {
            p.stem: Cassette.replay(p).lines for p in sorted(self.folder.glob(f"*{SUFFIX}"))
        }
        if not self._tapes:
            raise CassetteError(f"{self.folder} holds no cassette (*{SUFFIX})")
        bases = sorted(
            {_base(line["request"]["url"]) for lines in self._tapes.values() for line in lines}
        )
        if len(bases) != 1:
            raise CassetteError(
                f"{self.folder}: its cassettes were recorded against "
                f"{len(bases)} base URLs ({', '.join(bases) or 'none'}); a recording of one "
                "provider has one"
            )
        self.url = bases[0]
        self._played: dict[str, None] = {}  # in the order first played

    def __repr__(self) -> str:
        exchanges = sum(len(lines) for lines in self._tapes.values())
        return (
            f"<PaymentProvider as recorded in {self.folder}: {len(self._tapes)} runs, "
            f"{exchanges} exchanges; nothing listens at {self.url}>"
        )

    @property
    def names(self) -> list[str]:
        """The recorded runs, by name."""
        return list(self._tapes)

    def tape(self, name: str) -> str:
        """The cassette of recorded run ``name`` (for ``replay=`` or ``--replay``); from
        now on its exchanges are in the ledger."""
        if name not in self._tapes:
            raise CassetteError(
                f"{self.folder} holds no recording {name!r}; it holds "
                f"{', '.join(map(repr, self._tapes))}"
            )
        self._played.setdefault(name, None)
        return str(self.folder / f"{name}{SUFFIX}")

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request of the tapes played since the last ``reset``, in order."""
        return [_request(name, line) for name in self._played for line in self._tapes[name]]

    def records(self, collection: str) -> list[dict[str, Any]]:
        """The objects the provider answered it created in ``collection`` ("charges"),
        in the tapes played since the last ``reset``, duplicates included."""
        found = []
        for name in self._played:
            for line in self._tapes[name]:
                request = _request(name, line)
                if (
                    request.method == "POST"
                    and request.path.rstrip("/").split("/")[-1] == collection
                    and request.status is not None
                    and 200 <= request.status < 300
                    and not request.replayed
                ):
                    found.append(_json_body(line["response"], f"{name}{SUFFIX}"))
        return found

    def reset(self) -> None:
        """Forget the tapes played: the ledger starts empty again."""
        self._played.clear()

    def stop(self) -> None:
        """Nothing runs, so nothing stops (the live provider's ``stop``)."""


def _base(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _request(name: str, line: dict[str, Any]) -> RecordedRequest:
    request, response = line["request"], line.get("response")
    answer = {str(k).lower(): str(v) for k, v in (response or {}).get("headers") or []}
    parts = urlsplit(request["url"])
    return RecordedRequest(
        tape=name,
        name=line.get("name"),
        method=request["method"].upper(),
        path=parts.path + (f"?{parts.query}" if parts.query else ""),
        headers={str(k): str(v) for k, v in request.get("headers") or []},
        status=None if response is None else response["status"],
        replayed=answer.get("idempotent-replayed", "").lower() == "true",
    )


def _json_body(response: dict[str, Any], where: str) -> dict[str, Any]:
    try:
        body = json.loads(response.get("body") or "")
    except (TypeError, ValueError):
        body = None
    if not isinstance(body, dict):
        raise CassetteError(
            f"{where}: a 2xx answer that created an object has no JSON object as its body"
        )
    return body
