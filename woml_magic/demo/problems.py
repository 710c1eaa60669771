"""HTTP responses of the demo API, and its RFC 9457 problem documents (spec §8).

Every error the demo API answers is ``application/problem+json`` with ``type``,
``title``, ``status`` and ``detail`` (spec §8: "Errors are application/problem+json").
``detail`` is one sentence that names the bad value and what is allowed (STYLE 6).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

#: Problem types live under a reserved, never-resolving domain (RFC 2606 ``.invalid``):
#: they are identifiers for clients to compare, not links to follow (RFC 9457 §3.1.1).
PROBLEM_BASE = "https://woml-magic.invalid/demo/problems/"

JSON_TYPE = "application/json"
PROBLEM_TYPE = "application/problem+json"


@dataclass(frozen=True)
class Response:
    """One HTTP response as the demo API computed it: what is stored and replayed."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (every demo API body is JSON)."""
        return json.loads(self.body)

    def with_headers(self, *extra: tuple[str, str]) -> Response:
        """A copy with ``extra`` headers appended (e.g. ``Idempotent-Replayed``)."""
        return Response(self.status, self.headers + extra, self.body)


class ProblemError(Exception):
    """Raised inside request processing to answer with ``response`` (a problem)."""

    def __init__(self, response: Response) -> None:
        self.response = response
        super().__init__(response.json().get("detail", ""))


def encode(value: Any) -> bytes:
    """Compact UTF-8 JSON, the one encoding of every body the demo API sends."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def json_response(status: int, value: Any, *headers: tuple[str, str]) -> Response:
    """A ``application/json`` response carrying ``value``."""
    return Response(status, (("Content-Type", JSON_TYPE), *headers), encode(value))


def problem(
    status: int,
    detail: str,
    *,
    slug: str | None = None,
    title: str | None = None,
    headers: tuple[tuple[str, str], ...] = (),
    **extra: Any,
) -> Response:
    """An RFC 9457 problem response (spec §8).

    Without ``slug`` the type is ``about:blank`` and the title the status phrase, as
    RFC 9457 §4.2.1 asks for problems that add nothing to the status code's meaning.
    """
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + slug if slug else "about:blank",
        "title": title or phrase,
        "status": status,
        "detail": detail,
    }
    body.update(extra)
    return Response(status, (("Content-Type", PROBLEM_TYPE), *headers), encode(body))


def fail(status: int, detail: str, **kwargs: Any) -> ProblemError:
    """A ``ProblemError`` ready to raise: ``raise fail(400, "...", slug="invalid-request")``."""
    return ProblemError(problem(status, detail, **kwargs))
