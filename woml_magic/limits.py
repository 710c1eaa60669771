"""Limits on everything that crosses into the kernel (spec §3.2, §4.5, §6.1).

A script runs in its own process, but what it says (console lines, service-call
arguments, its result) and what the kernel fetches for it (HTTP bodies), and the
payload a user passes, all become memory in the kernel. Each is bounded here, and a
breach names its limit::

    limit                  default   allowed          what is refused
    memory_limit_mb        128       8 … 4096 MiB     a script heap larger (``crash``)
    max_result_bytes       256 KiB   1 … 64 MiB       a result's JSON text larger
                                                      (``oversized``)
    max_payload_bytes      10 MiB    1 … 1 GiB        a payload whose JSON text is larger
                                                      (before the run)
    max_json_depth         64        1 … 512          payloads, service-call arguments,
                                                      results and JSON response bodies
                                                      nested deeper
    max_call_args_bytes    1 MiB     1 … 256 MiB      one services.* call's arguments as
                                                      JSON text
    max_log_lines          1,000     1 … 1,000,000    console lines of one attempt (a
                                                      "\\n" starts a line)
    max_log_bytes          64 KiB    1 … 256 MiB      console text of one attempt, UTF-8
    max_response_bytes     10 MiB    1 … 1 GiB        an HTTP response body, counted after
                                                      decompression

Depth counts containers: ``1`` and ``"a"`` have depth 0, ``[]`` and ``{}`` depth 1,
``[[1]]`` depth 2.

Each limit is declared once, as a field of ``Limits``: its name, default, range and
help text (``LIMITS``; the ranges alone are ``LIMIT_RANGES``). ``%config Woml`` and
``woml run`` make their settings and flags from that declaration, and every value is
checked in one place (``check_limit``, run by ``Limits`` itself): the Python API,
``%config Woml`` and ``woml run`` refuse the same values with the same sentence. The
upper bounds keep a typo from letting a script exhaust the kernel; the memory limit's
lower bound leaves the script's own runtime room to start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Final

from .errors import WomlLimitError, WomlRunError, quote

DEFAULT_MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_JSON_DEPTH = 64
DEFAULT_MAX_CALL_ARGS_BYTES = 1024 * 1024
DEFAULT_MAX_LOG_LINES = 1000
DEFAULT_MAX_LOG_BYTES = 64 * 1024
DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024
#: A step's timeout when its ``timeout`` attribute is absent (spec §2.2), in seconds;
#: also the default of one HTTP request's own timeout (spec §4.1).
DEFAULT_TIMEOUT_S = 30.0
#: The memory limit of one attempt's script heap (spec §3.2 ``crash``), in MiB.
DEFAULT_MEMORY_LIMIT_MB = 128
#: The largest result JSON text, in UTF-8 bytes (spec §3.2 ``oversized``).
DEFAULT_MAX_RESULT_BYTES = 256 * 1024

#: The most clients one retry lab runs (spec §11): each is a real run of the cell's
#: scripts in this kernel, kept as a ``Run`` in its result (about 4 s a thousand, and
#: their memory). ``lab()``, ``%%woml --clients`` and their messages name this bound.
MAX_CLIENTS = 10_000
#: The most clients of the lab's model-only path (``lab.simulate``, spec §11): the same
#: schedule against the same server model, but no scripts run and no ``Run`` is kept,
#: only counts, so it models ten times as many (the bound keeps a typo from stalling the
#: kernel for minutes). ``simulate`` and its message name this bound.
MAX_MODEL_CLIENTS = 100_000

#: The largest ``max_json_depth`` allowed: Python's own JSON reader and writer recurse,
#: and the kernel must never meet a ``RecursionError`` (its default limit is 1,000).
MAX_JSON_DEPTH_LIMIT = 512

_MIB = 1024 * 1024


def clients_allowed(*, model_only: bool = False) -> str:
    """What a lab's ``clients`` may be, and why, as every refusal says it (spec §11): the
    two bounds are of two things (``MAX_CLIENTS`` real runs, ``MAX_MODEL_CLIENTS``
    modelled clients), so each message names its own and the other."""
    if model_only:
        return (f"1 to {MAX_MODEL_CLIENTS:,} clients (woml_magic.limits.MAX_MODEL_CLIENTS: "
                "the model path runs no scripts; a lab of real runs takes up to "
                f"{MAX_CLIENTS:,})")
    return (f"1 to {MAX_CLIENTS:,} clients (woml_magic.limits.MAX_CLIENTS: each is a real "
            "run of the scripts in this kernel; the model-only path, "
            f"woml_magic.lab.simulate, takes up to {MAX_MODEL_CLIENTS:,})")


def check_limit(name: str, value: object) -> int:
    """``value`` as limit ``name``, or the refusal every surface gives (spec §6.1): a
    ``WomlLimitError`` (``allowed`` the bound it crosses) for an integer out of
    ``LIMIT_RANGES[name]``, a ``WomlRunError`` for anything but an integer, each one
    sentence naming the limit, the value and the range, e.g. ``max_log_lines 0 is out
    of range; use 1 to 1000000 lines``."""
    low, high, unit = LIMIT_RANGES[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise WomlRunError(
            f"{name} {quote(value)} is not an integer; use {low} to {high} {unit}")
    if not low <= value <= high:
        raise WomlLimitError(
            f"{name} {value} is out of range; use {low} to {high} {unit}",
            limit=name, value=value, allowed=low if value < low else high,
        )
    return value


@dataclass(frozen=True)
class Limit:
    """One limit's declaration (the module docstring): it may be set to ``low`` to
    ``high`` (in ``unit``), is ``default`` unless set, and ``help`` says what it bounds,
    with its spec section; ``%config Woml`` shows that as the setting's help."""

    default: int
    low: int
    high: int
    unit: str
    help: str


def _limit(default: int, low: int, high: int, unit: str, text: str) -> int:
    """A field of ``Limits`` that declares its limit (a ``Limit``, read by ``LIMITS``)."""
    return field(default=default, metadata={"limit": Limit(default, low, high, unit, text)})


@dataclass(frozen=True)
class Limits:
    """The limits of one run and of each of its attempts (the module docstring; spec
    §3.2, §4.5, §6.1), each checked by ``check_limit`` when made. Each field is the one
    declaration of its limit (``LIMITS``)."""

    memory_limit_mb: int = _limit(
        DEFAULT_MEMORY_LIMIT_MB, 8, 4096, "MiB",
        "The memory limit of one attempt's script, in MiB (spec §3.2 `crash`).")
    max_result_bytes: int = _limit(
        DEFAULT_MAX_RESULT_BYTES, 1, 64 * _MIB, "bytes",
        "The largest JSON text a step may return (spec §3.2 `oversized`).")
    max_payload_bytes: int = _limit(
        DEFAULT_MAX_PAYLOAD_BYTES, 1, 1024 * _MIB, "bytes",
        "The largest payload, as JSON text in bytes; a larger one is refused before the "
        "run (spec §4.5).")
    max_json_depth: int = _limit(
        DEFAULT_MAX_JSON_DEPTH, 1, MAX_JSON_DEPTH_LIMIT, "levels",
        "How deeply payloads, service-call arguments, results and JSON response bodies "
        "may nest arrays and objects (spec §4.5).")
    max_call_args_bytes: int = _limit(
        DEFAULT_MAX_CALL_ARGS_BYTES, 1, 256 * _MIB, "bytes",
        "The largest arguments of one services.* call, as JSON text in bytes (spec §4.5).")
    max_log_lines: int = _limit(
        DEFAULT_MAX_LOG_LINES, 1, 1_000_000, "lines",
        "Console lines one attempt may print (spec §4.4, §4.5).")
    max_log_bytes: int = _limit(
        DEFAULT_MAX_LOG_BYTES, 1, 256 * _MIB, "bytes",
        "Console text one attempt may print, in UTF-8 bytes (spec §4.4, §4.5).")
    max_response_bytes: int = _limit(
        DEFAULT_MAX_RESPONSE_BYTES, 1, 1024 * _MIB, "bytes",
        "The largest HTTP response body, counted after decompression (spec §4.1, §4.5).")

    def __post_init__(self) -> None:
        for item in fields(self):
            check_limit(item.name, getattr(self, item.name))

    @property
    def memory_limit_bytes(self) -> int:
        """``memory_limit_mb`` in bytes: what the script worker's heap may hold."""
        return self.memory_limit_mb * _MIB


#: Every limit as ``Limits`` declares it, in its order: the settings of ``%config Woml``
#: and the flags of ``woml run`` are made from this (STYLE 14).
LIMITS: Final[Mapping[str, Limit]] = MappingProxyType({
    item.name: item.metadata["limit"] for item in fields(Limits)
})
#: What each limit may be set to: ``(lowest, highest, unit)`` (the module docstring says
#: why), as ``LIMITS`` declares it; ``check_limit`` refuses what lies outside.
LIMIT_RANGES: Final[Mapping[str, tuple[int, int, str]]] = MappingProxyType({
    name: (limit.low, limit.high, limit.unit) for name, limit in LIMITS.items()
})


def json_depth(value: Any, stop_after: int | None = None) -> int:
    """How deeply ``value`` (parsed JSON) nests containers, without recursing.

    Stops counting once ``stop_after`` is passed (returns ``stop_after + 1``), so a
    hostile value costs at most what it takes to find that out.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if stop_after is not None and deepest > stop_after:
                return deepest
        for child in children:
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, depth))
    return deepest


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class JSONLimitError(ValueError):
    """A JSON text breaks a size or depth limit; ``limit`` names it."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


def loads_limited(
    text: str | bytes, *, max_depth: int, what: str,
    max_bytes: int | None = None, bytes_limit_name: str = "max_bytes",
) -> Any:
    """Parse strict JSON (no NaN or Infinity) that is no larger or deeper than allowed.

    Raises ``JSONLimitError`` (a ``ValueError``) naming the limit, or ``ValueError``
    for text that is not JSON. Never raises ``RecursionError``: Python's reader
    recurses, so a text deeper than the interpreter allows is reported as too deep.
    """
    if max_bytes is not None:
        size = len(text) if isinstance(text, bytes) else _utf8_size(text, max_bytes)
        if size > max_bytes:
            raise JSONLimitError(
                f"{what}: {size} bytes of JSON; the limit is {max_bytes} bytes "
                f"({bytes_limit_name})", bytes_limit_name,
            )
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise JSONLimitError(
            f"{what}: nested more than {max_depth} levels deep; the limit is {max_depth} "
            "(max_json_depth)", "max_json_depth",
        ) from None
    depth = json_depth(value, max_depth)
    if depth > max_depth:
        raise JSONLimitError(
            f"{what}: nested more than {max_depth} levels deep; the limit is {max_depth} "
            "(max_json_depth)", "max_json_depth",
        )
    return value


def _utf8_size(text: str, cap: int) -> int:
    """UTF-8 size of ``text``; a text that is surely over ``cap`` is not encoded."""
    if len(text) > cap:
        return len(text) if text.isascii() else max(len(text), cap + 1)
    return len(text.encode("utf-8", "surrogatepass"))


def check_payload_limits(
    payload: Any,
    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    max_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> str:
    """Refuse a payload too deep or too large before anything runs (spec §4.5, §6.1).

    Returns the payload's JSON text (compact, UTF-8 counted) so the caller need not
    encode it again. Raises ``WomlLimitError`` naming the limit, or ``TypeError`` /
    ``ValueError`` for a value that is not JSON (as ``json.dumps`` does). The depth is
    checked first, without recursing, so a 100,000-deep list is refused in
    microseconds, never with a ``RecursionError``.
    """
    depth = json_depth(payload, max_depth)
    if depth > max_depth:
        if _has_cycle(payload):
            raise ValueError("the payload contains a circular reference")
        raise WomlLimitError(
            f"the payload is nested more than {max_depth} levels deep; the limit is "
            f"{max_depth} (max_json_depth)",
            limit="max_json_depth", value=depth, allowed=max_depth,
        )
    _check_size_cheaply(payload, max_bytes)
    text = json.dumps(payload, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise WomlLimitError(
            f"the payload's JSON text is {size} bytes; the limit is {max_bytes} bytes "
            "(max_payload_bytes)",
            limit="max_payload_bytes", value=size, allowed=max_bytes,
        )
    return text


def _has_cycle(value: Any) -> bool:
    """Whether a container holds itself, directly or not (iterative depth-first walk)."""
    on_path: set[int] = set()
    done: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            done.add(id(item))
            continue
        if not isinstance(item, (dict, list, tuple)) or id(item) in done:
            continue
        if id(item) in on_path:
            return True
        on_path.add(id(item))
        stack.append((item, True))
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, False) for child in children)
    return False


def _check_size_cheaply(payload: Any, max_bytes: int) -> None:
    """Refuse a payload surely over ``max_bytes`` before encoding it (a lower bound)."""
    total = 0
    stack = [payload]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, (bytes, bytearray)):
            total += len(item)
        elif isinstance(item, dict):
            total += 2 + len(item)
            for key, child in item.items():
                total += len(key) + 2 if isinstance(key, str) else 1
                stack.append(child)
        elif isinstance(item, (list, tuple)):
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += 1
        if total > max_bytes:
            raise WomlLimitError(
                f"the payload's JSON text is more than {max_bytes} bytes; the limit is "
                f"{max_bytes} bytes (max_payload_bytes)",
                limit="max_payload_bytes", value=total, allowed=max_bytes,
            )

