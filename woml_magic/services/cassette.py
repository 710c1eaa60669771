"""Cassettes: a run's managed calls recorded once and replayed without the network
(spec §10.4).

A cassette is a text file, one JSON object a line (JSON Lines), so ``git diff`` shows
one changed line for each changed exchange and a recording is appended to, never
rewritten:

    {"woml-cassette": 1}
    {"request": {...}, "step": "charge", "stepKey": "…", "name": "create-charge", "response": {...}}
    {"request": {...}, "step": "charge", "stepKey": "…", "name": null, "error": {...}}

A request is kept **as written**: its URL and headers with secret references
(``⟦woml-secret:NAME⟧``, spec §10.1) rather than values, redacted headers as ``•••``,
its body as sent with every value scrubbed back to its reference; a response has its
secret values scrubbed and its redacted headers masked the same way, and its body
decoded (no ``Content-Encoding``). So a cassette never holds a secret.

Both sides are httpx transports under ``HttpService`` (``cassette_transport``; one
pipeline: the allow-list, faults, caps and scrubbing act on a replay as on a live
call). ``HttpService`` tells the transport what it knows of the call in the request's
``extensions`` (``CALL``).

Matching (replay) is by method, URL, body and idempotency key, with the step's own
key (``attempt.idempotencyKey``, which depends on the run id) read by its role: a
recorded ``stepKey`` and this run's match wherever either stands in the URL, the body
or the key header. Each recorded exchange answers once, in order; then a request that
repeats a recorded key gets the last recorded answer for that key (the provider's
stored answer, ``Idempotent-Replayed`` as recorded), and a keyless repeat the
recording does not hold is an error naming it and the nearest recorded exchange.
"""

from __future__ import annotations

import base64
import difflib
import json
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

import httpx

from ..errors import CassetteError, ServiceRejection
from ..redaction import redact_headers

if TYPE_CHECKING:
    from .http_request import HttpRequest
    from .scope import CallScope
    from .secrets import Secrets

VERSION: Final = 1
HEADER: Final = {"woml-cassette": VERSION}

RecordMode = Literal["new", "overwrite", "append"]
RECORD_MODES: Final[tuple[str, ...]] = get_args(RecordMode)

#: The key of ``httpx.Request.extensions`` that carries the ``Call``.
CALL: Final = "woml.cassette"

#: The transport errors a recording may hold, re-raised as recorded on replay: each
#: is one httpx documents (``http_outcome.classify_transport_error`` tells them apart).
TRANSPORT_ERRORS: Final[dict[str, type[httpx.TransportError]]] = {
    cls.__name__: cls
    for cls in (
        httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadError, httpx.ReadTimeout,
        httpx.WriteError, httpx.WriteTimeout, httpx.PoolTimeout, httpx.RemoteProtocolError,
        httpx.LocalProtocolError, httpx.NetworkError, httpx.ProxyError,
        httpx.UnsupportedProtocol,
    )
}
#: An exchange the attempt cut short while it was in flight (its timeout, a stop).
CANCELLED: Final = "cancelled"
#: Headers that describe the body as it was on the wire, not as it is kept.
WIRE_HEADERS: Final = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@dataclass(frozen=True)
class Call:
    """What ``HttpService`` knows of a call, for the cassette: the request as written
    (``url``, ``headers`` redacted, ``body`` with secret references, not values), the
    idempotency header as written, and the step it belongs to with the step's key in
    this run (``attempt.idempotencyKey``)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None
    key: tuple[str, str] | None
    step_id: str
    step_key: str
    name: str | None
    redact: tuple[str, ...]
    scrub: Callable[[str], str] | None = field(default=None, compare=False)

    @classmethod
    def of(cls, req: HttpRequest, scope: CallScope, redact: tuple[str, ...],
           secrets: Secrets) -> Call:
        """What a cassette keeps of ``req``: the request as written, its body as sent
        with secret values scrubbed back to references (the display form's encoded
        references carry a nonce, so they differ from run to run)."""
        body = req.content
        if body is not None and secrets:
            try:
                body = secrets.scrub(body.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                if secrets.reveals(body.decode("latin-1")):
                    raise ServiceRejection(
                        "TypeError", f"{req.method} {req.shown_url}: a body that is not "
                        "UTF-8 text holds a secret value, and a cassette cannot keep it "
                        "without the value (spec §10.4)") from None
        return cls(
            method=req.method, url=req.shown_url,
            headers=tuple(redact_headers(dict(req.shown_headers), redact).items()),
            body=body, key=req.shown_idempotency, step_id=scope.step_id,
            step_key=scope.step_key, name=req.name, redact=redact,
            scrub=secrets.scrub if secrets else None,
        )

    def recorded(self) -> dict[str, Any]:
        """The request side of a cassette line."""
        return {
            "method": self.method,
            "url": self.url,
            "headers": [list(pair) for pair in self.headers],
            "body": kept_body(self.body),
            "idempotency": None if self.key is None
            else {"header": self.key[0], "value": self.key[1]},
        }


def kept_body(body: bytes | None) -> str | dict[str, str] | None:
    """A body as kept: text when it is UTF-8, else ``{"base64": …}``."""
    if body is None:
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode("ascii")}


def body_bytes(kept: Any, where: str) -> bytes:
    if kept is None:
        return b""
    if isinstance(kept, str):
        return kept.encode("utf-8")
    if isinstance(kept, dict) and isinstance(kept.get("base64"), str):
        try:
            return base64.b64decode(kept["base64"], validate=True)
        except ValueError:
            pass
    raise CassetteError(f"{where}: a body is a string or {{\"base64\": \"…\"}}")


@dataclass(frozen=True)
class _Form:
    """A request in the form matching compares: the step's key read by its role."""

    method: str
    url: str
    body: str
    key: str | None

    @classmethod
    def of(cls, request: dict[str, Any], step_key: str) -> _Form:
        def norm(text: str) -> str:
            return text.replace(step_key, "{attempt.idempotencyKey}") if step_key else text

        body = request.get("body")
        key = request.get("idempotency")
        return cls(
            method=str(request.get("method", "")).upper(),
            url=norm(str(request.get("url", ""))),
            body=norm(body if isinstance(body, str) else json.dumps(body, sort_keys=True)),
            key=None if not isinstance(key, dict) else
            f"{str(key.get('header', '')).lower()}: {norm(str(key.get('value', '')))}",
        )

    def describe(self) -> str:
        body = self.body if len(self.body) <= 120 else self.body[:117] + "..."
        return (f"{self.method} {self.url}" + (f" with body {body}" if body else "")
                + (f", key {self.key}" if self.key else ", no key"))


class Cassette:
    """One cassette file, opened to record into or to replay from (spec §10.4).

    ``Cassette.record(path, mode)`` refuses an existing file unless ``mode`` is
    ``overwrite`` (start afresh) or ``append`` (add to it); each exchange is one line
    appended and flushed as it ends, so a run cut short keeps what it recorded.
    ``Cassette.replay(path)`` reads the whole file first and refuses it with the line
    that is wrong.
    """

    def __init__(self, path: Path, *, replaying: bool, lines: list[dict[str, Any]]) -> None:
        self.path = path
        self.replaying = replaying
        self.lines = lines
        self._forms = [_Form.of(line["request"], str(line.get("stepKey", ""))) for line in lines]
        #: For each form, the recorded lines not yet answered, in order; and the last
        #: line with a response (what the provider stores under a key).
        self._unused: dict[_Form, deque[int]] = {}
        self._stored: dict[_Form, int] = {}
        for index, form in enumerate(self._forms):
            self._unused.setdefault(form, deque()).append(index)
            if "response" in lines[index]:
                self._stored[form] = index

    # --- opening -------------------------------------------------------------------

    @classmethod
    def record(cls, path: str | os.PathLike[str], mode: str = "new") -> Cassette:
        where = Path(path)
        if mode not in RECORD_MODES:
            raise CassetteError(
                f"record mode {mode!r} is not one of {', '.join(RECORD_MODES)} (new: the "
                "file must not exist; overwrite: start it afresh; append: add to it)"
            )
        exists = where.exists()
        if exists and mode == "new":
            raise CassetteError(
                f"{where} exists, and recording would replace it; pass --record-mode "
                "overwrite (record_mode='overwrite') to start it afresh, or append to add "
                "this run's calls to it"
            )
        lines = cls._read(where) if exists and mode == "append" else []
        if not where.parent.is_dir():
            raise CassetteError(f"{where}: the folder {where.parent} does not exist")
        if not (exists and mode == "append"):
            where.write_text(json.dumps(HEADER) + "\n", encoding="utf-8")
        return cls(where, replaying=False, lines=lines)

    @classmethod
    def replay(cls, path: str | os.PathLike[str]) -> Cassette:
        where = Path(path)
        return cls(where, replaying=True, lines=cls._read(where))

    @staticmethod
    def _read(where: Path) -> list[dict[str, Any]]:
        try:
            text = where.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CassetteError(f"{where}: no such cassette (record one with --record "
                                f"{where})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CassetteError(f"{where}: cannot read it as a cassette ({exc})") from None
        rows = text.splitlines()
        if not rows or _loads(rows[0]) != HEADER:
            raise CassetteError(
                f"{where}: line 1 is not a cassette header; a woml cassette starts with "
                f"the line {json.dumps(HEADER)}"
            )
        lines: list[dict[str, Any]] = []
        for number, row in enumerate(rows[1:], start=2):
            if not row.strip():
                continue
            line = _loads(row)
            problem = _problem(line)
            if problem is not None:
                last = number == len(rows) and not text.endswith("\n")
                raise CassetteError(
                    f"{where}, line {number}: {problem}"
                    + (" (the last line is cut short: the recording was interrupted; "
                       "delete that line to use the rest)" if last else "")
                )
            lines.append(line)
        return lines

    # --- recording -----------------------------------------------------------------

    def append(self, call: Call, outcome: dict[str, Any]) -> None:
        """Add one exchange: ``outcome`` is ``{"response": …}`` or ``{"error": …}``."""
        line = {"request": call.recorded(), "step": call.step_id, "stepKey": call.step_key,
                "name": call.name, **outcome}
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
        self.lines.append(line)
        self._forms.append(_Form.of(line["request"], call.step_key))

    # --- replaying -----------------------------------------------------------------

    def answer(self, call: Call) -> dict[str, Any]:
        """The recorded line that answers ``call``, or ``Unmatched``."""
        form = _Form.of(call.recorded(), call.step_key)
        waiting = self._unused.get(form)
        if waiting:
            return self.lines[waiting.popleft()]
        if form.key is not None and form in self._stored:
            # The provider's key contract: a repeat of a key it has seen gets its stored
            # answer; the last one recorded for that key is the one it would give.
            return self.lines[self._stored[form]]
        raise Unmatched(self._unmatched(form))

    def _unmatched(self, form: _Form) -> str:
        text = f"the replay of {self.path} holds no exchange for {form.describe()}"
        if not self._forms:
            return text + "; the cassette is empty"
        nearest = max(range(len(self._forms)), key=lambda i: _likeness(self._forms[i], form))
        near = self._forms[nearest]
        differs = [what for what, a, b in (
            ("method", near.method, form.method), ("URL", near.url, form.url),
            ("body", near.body, form.body), ("idempotency key", near.key, form.key),
        ) if a != b]
        said = (f"; the nearest recorded one (line {nearest + 2}) is {near.describe()}, "
                + (f"differing in its {' and '.join(differs)}" if differs else
                   "already answered: this request repeats it without a key, and the "
                   "recording does not say what the provider did the second time"))
        return (text + said + f"; record again with --record {self.path} --record-mode "
                "append to add it")


class Unmatched(Exception):
    """A replayed request the cassette holds no answer for; ``str`` says which and the
    nearest recorded one."""


def _likeness(a: _Form, b: _Form) -> tuple[int, int, float, int]:
    return (a.method == b.method, a.url == b.url,
            difflib.SequenceMatcher(None, a.body, b.body).quick_ratio(), a.key == b.key)


def _loads(row: str) -> Any:
    try:
        return json.loads(row)
    except ValueError:
        return None


def _problem(line: Any) -> str | None:
    """What is wrong with a cassette line, or ``None``."""
    if not isinstance(line, dict):
        return "not a JSON object (each line after the header is one exchange)"
    request = line.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("method"), str) \
            or not isinstance(request.get("url"), str):
        return "an exchange needs a \"request\" with a \"method\" and a \"url\""
    if ("response" in line) == ("error" in line):
        return "an exchange has exactly one of \"response\" and \"error\""
    response = line.get("response")
    if response is not None and not (isinstance(response, dict)
                                     and isinstance(response.get("status"), int)
                                     and 100 <= response["status"] <= 599):
        return "a \"response\" needs a \"status\" from 100 to 599"
    error = line.get("error")
    if error is not None and not (isinstance(error, dict)
                                  and error.get("type") in (*TRANSPORT_ERRORS, CANCELLED)):
        return (f"an \"error\" has a \"type\" of {', '.join((*TRANSPORT_ERRORS, CANCELLED))}")
    return None
