"""A lab's arguments, checked before anything runs (spec §11): ``_plan`` reads the
keyword arguments of ``lab`` and ``lab_async`` (``LabOptions``) into a ``_Plan``, or
raises ``LabArgumentError`` / ``LabModelError`` with one sentence naming the bad value
and what is allowed. The server a lab runs against is settled here too: a model
(``server.ModelServer``, a preset, with fields changed) or a real API on this machine
(``loopback_url``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from ..errors import LabArgumentError, LabModelError, quote
from ..limits import MAX_CLIENTS, clients_allowed
from .result import AMPLE
from .server import PRESETS, ModelServer, outage_window, server_model
from .simulate import Arrivals
from .whatif import WhatIf

if TYPE_CHECKING:
    from ..engine.config import Fault, Secrets
    from ..model import Workflow


#: The hosts a lab may send real requests to: this machine only (spec §8's demo API).
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class RealAPI(Protocol):
    """A running API on this machine, as the lab needs it (``demo.DemoAPI`` is one)."""

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        ...


@dataclass(frozen=True)
class _Plan:
    """A lab's arguments, checked before anything runs."""

    workflow: Workflow
    clients: int
    seed: int
    model: ModelServer | None
    url: str | None  # a real API's base URL, when there is no model
    arrivals: Arrivals
    overlays: tuple[WhatIf, ...]
    sample: int
    payload: Callable[[int], Any] | None
    workers: int
    secrets: Secrets | None = dataclasses.field(default=None, repr=False)
    faults: tuple[Fault, ...] = ()


class LabOptions(TypedDict, total=False):
    """How to run a lab (spec §11): the keyword arguments of ``lab`` and ``lab_async``
    beside ``clients`` (see ``lab`` for each)."""

    seed: int
    server: ModelServer | str | RealAPI | None
    capacity: float | None
    outage: str | tuple[float | str, float | str] | None
    throttle: bool | None
    occ: bool | None
    start_spread: float
    arrivals: Arrivals | str | None
    what_if: str | WhatIf | Sequence[str | WhatIf]
    sample: int
    payload: Any
    workers: int | None
    secrets: Secrets | Mapping[str, str] | None
    faults: Iterable[str | Fault]


def _plan(text_or_workflow: str | Workflow, clients: int, options: dict[str, Any]) -> _Plan:
    unknown = sorted(set(options) - set(LabOptions.__annotations__))
    if unknown:
        raise LabArgumentError(
            f"lab() got an unexpected keyword argument "
            f"{quote(unknown[0], 40)}; it takes clients and "
            f"{', '.join(LabOptions.__annotations__)}"
        )
    seed = options.get("seed", 0)
    sample = options.get("sample", 3)
    workers = options.get("workers")
    start_spread = options.get("start_spread", 0.0)
    arrivals = options.get("arrivals")
    payload = options.get("payload")
    from ..engine.config import Secrets, parse_faults
    from ..model import Workflow
    from ..parse import parse
    from .labclock import DEFAULT_WORKERS

    if isinstance(text_or_workflow, Workflow):
        workflow = text_or_workflow
    elif isinstance(text_or_workflow, str):
        workflow = parse(text_or_workflow)
    else:
        raise LabArgumentError(
            f"lab() takes WOML text or a Workflow, not {type(text_or_workflow).__name__}"
        )
    if isinstance(clients, bool) or not isinstance(clients, int) or not 1 <= clients <= MAX_CLIENTS:
        raise LabModelError(
            f"clients must be a whole number from {clients_allowed()}; got {quote(clients)}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabModelError(f"seed must be a whole number, got {seed!r}")
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise LabModelError(f"sample must be a whole number of clients, 0 or more, got {sample!r}")
    workers = DEFAULT_WORKERS if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 16:
        raise LabModelError(f"workers must be a whole number from 1 to 16, got {workers!r}")
    model, url = _server(
        options.get("server"),
        options.get("capacity"),
        options.get("outage"),
        options.get("throttle"),
        options.get("occ"),
    )
    overlays = _overlays(options.get("what_if", ()))
    if overlays and model is None:
        raise LabModelError(
            "what-if overlays are model-only simulations: give a model "
            "server (server=None, a preset or a ModelServer), not a real "
            "API"
        )
    return _Plan(
        workflow,
        clients,
        seed,
        model,
        url,
        _arrivals(start_spread, arrivals),
        overlays,
        sample,
        _payload(payload),
        workers,
        Secrets.of(options.get("secrets")),
        parse_faults(options.get("faults")),
    )


def _server(
    server: ModelServer | str | RealAPI | None,
    capacity: float | None,
    outage: object,
    throttle: bool | None,
    occ: bool | None,
) -> tuple[ModelServer | None, str | None]:
    """The model (with the given fields changed), or a real API's base URL."""
    changes: dict[str, Any] = {}
    if capacity is not None:
        changes["capacity"] = capacity
    if outage is not None:
        changes["outage"] = outage_window(outage)
    for flag, value in (("throttle", throttle), ("occ", occ)):
        if value is not None and not isinstance(value, bool):
            raise LabModelError(f"{flag} must be True, False or None, got {quote(value, 30)}")
        if value is not None:
            changes[flag] = value
    url: object = None
    if isinstance(server, str) and "://" in server:
        url = server
    elif server is not None and not isinstance(server, (str, ModelServer)):
        url = getattr(server, "url", None)
    if url is None:
        if isinstance(server, str):
            model = preset(server)
        elif isinstance(server, ModelServer) or server is None:
            model = server if server is not None else AMPLE
        else:
            raise LabModelError(
                f"server must be a ModelServer, one of {', '.join(PRESETS)}, "
                f"a running DemoAPI or its URL, not {quote(server)}"
            )
        return (dataclasses.replace(model, **changes) if changes else model), None
    if changes:
        raise LabModelError(
            f"{', '.join(changes)} describe a server model; {url} is a real "
            f"API (use a model: server=None or one of {', '.join(PRESETS)})"
        )
    return None, loopback_url(str(url))


def preset(name: str) -> ModelServer:
    """The server model ``name`` (``server.PRESETS``); "demo" is not one: the lab
    sends to a running demo API, which it does not start."""
    if name == "demo":
        raise LabModelError(
            "the lab does not start the demo API itself: start it and give it, "
            "`with DemoAPI() as api: wm.lab(..., server=api)` (or its URL)"
        )
    return server_model(name)


def loopback_url(url: str) -> str:
    """``url`` without a trailing slash, if it is an http URL of this machine: a lab's
    thousand clients never leave it (spec §8: the demo API listens on 127.0.0.1)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or parts.hostname not in LOOPBACK:
        raise LabModelError(
            f"a lab sends real requests only to this machine "
            f"({', '.join(LOOPBACK)}), not to {quote(url)}; start the demo API "
            f"(`with DemoAPI() as api:`) or use a server model"
        )
    return url.rstrip("/")


def _overlays(what_if: str | WhatIf | Sequence[str | WhatIf]) -> tuple[WhatIf, ...]:
    items: Sequence[object] = [what_if] if isinstance(what_if, (str, WhatIf)) else what_if
    if not isinstance(items, (list, tuple)) or not all(isinstance(w, (str, WhatIf)) for w in items):
        raise LabModelError(
            f'what_if must be an overlay such as "jitter=full", a WhatIf, '
            f"or a list of them, not {quote(what_if)}"
        )
    return tuple(w if isinstance(w, WhatIf) else WhatIf.parse(w) for w in items)


def _arrivals(start_spread: float, arrivals: Arrivals | str | None) -> Arrivals:
    if arrivals is not None:
        if start_spread:
            raise LabModelError("give start_spread or arrivals, not both")
        if not isinstance(arrivals, (str, Arrivals)):
            raise LabModelError(
                f'arrivals must be "at-once", "uniform:60s", '
                f'"poisson:20/s" or an Arrivals, not {quote(arrivals)}'
            )
        return Arrivals.parse(arrivals) if isinstance(arrivals, str) else arrivals
    if (
        isinstance(start_spread, bool)
        or not isinstance(start_spread, (int, float))
        or not (math.isfinite(start_spread) and start_spread >= 0)
    ):
        raise LabModelError(f"start_spread must be zero or more seconds, got {start_spread!r}")
    return Arrivals.uniform(float(start_spread)) if start_spread else Arrivals.at_once()


def _payload(payload: Any) -> Callable[[int], Any] | None:
    if payload is None:
        return None
    if callable(payload):
        return payload  # type: ignore[no-any-return]  # a function of the client number
    return lambda _n: payload
