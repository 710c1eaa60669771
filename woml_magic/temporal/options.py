"""Where the Temporal engine's runs go (spec §9): ``TemporalOptions``, and ``connect``,
one connected ``temporalio`` client per event loop and cluster.

``target=None`` is the process's local dev server (``server.local_dev_server``),
started on first use; any other target is ``HOST:PORT`` of a cluster of your own or
Temporal Cloud (``tls``, ``api_key``). temporalio is imported only inside ``connect``:
this module loads without the ``temporal`` extra, so options can be checked first.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import WomlRunError
from .server import NAMESPACE, local_dev_server, missing, running_local_dev_server

if TYPE_CHECKING:
    from temporalio.client import Client

#: The task queue of the magic, the API and ``woml worker`` unless told otherwise.
TASK_QUEUE = "woml"
_EXAMPLE = "127.0.0.1:7233 or my-namespace.a1b2c.tmprl.cloud:7233"


@dataclass(frozen=True)
class TemporalOptions:
    """How to reach a Temporal cluster (spec §9).

    - ``target``: ``HOST:PORT`` of the frontend; None for the local dev server;
    - ``namespace`` and ``task_queue``: where workflows and activities go;
    - ``tls``: connect over TLS with the system's roots; always on with an ``api_key``
      (a bearer token never travels in clear text);
    - ``api_key``: a Temporal Cloud API key; never shown by ``repr``/``str``;
    - ``ui``: serve the local dev server's Web UI (on its first start; see
      ``server.local_dev_server``); ignored with a ``target``.
    """

    target: str | None = None
    namespace: str = NAMESPACE
    task_queue: str = TASK_QUEUE
    tls: bool = False
    api_key: str | None = field(default=None, repr=False)
    ui: bool = False
    #: The Web UI of a cluster of your own (e.g. ``http://host:8233``): the timeline's
    #: header links to each run there. The local dev server's is known by itself.
    web_ui: str | None = None

    def __post_init__(self) -> None:
        if self.target is not None:
            _check_target(self.target)
        _check_name("namespace", self.namespace)
        _check_name("task_queue", self.task_queue)
        if self.api_key is not None and (not isinstance(self.api_key, str)
                                         or not self.api_key.strip()):
            raise WomlRunError("api_key is empty; give the key itself, or None for no key")
        if self.target is None and (self.tls or self.api_key is not None):
            raise WomlRunError(
                "tls and api_key are for a cluster of your own (target 'HOST:PORT', "
                "--temporal); the local dev server speaks plain gRPC on 127.0.0.1"
            )
        if self.target is None and self.namespace != NAMESPACE:
            raise WomlRunError(
                f"namespace {self.namespace!r} needs a cluster of your own (target "
                f"'HOST:PORT', --temporal); the local dev server has the "
                f"{NAMESPACE!r} namespace only"
            )

    @property
    def uses_tls(self) -> bool:
        """Whether ``connect`` uses TLS: asked for, or implied by an API key."""
        return self.tls or self.api_key is not None


def _check_target(target: object) -> None:
    """``HOST:PORT``: a host (an IPv6 address in brackets) and a port 1–65535."""
    if not isinstance(target, str):
        raise WomlRunError(
            f"target must be 'HOST:PORT' text, e.g. {_EXAMPLE}; got {type(target).__name__}"
        )
    if "://" in target:
        raise WomlRunError(
            f"the Temporal address {target!r} has a scheme; give HOST:PORT only, e.g. {_EXAMPLE}"
        )
    host, sep, port = target.rpartition(":")
    if not sep or not host or any(c.isspace() for c in target):
        raise WomlRunError(f"the Temporal address {target!r} is not HOST:PORT, e.g. {_EXAMPLE}")
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise WomlRunError(
            f"the Temporal address {target!r} has port {port!r}; a port is a number from 1 to 65535"
        )
    bracketed = host.startswith("[") and host.endswith("]") and len(host) > 2
    if ":" in host and not bracketed:
        raise WomlRunError(
            f"the Temporal address {target!r}: an IPv6 address goes in brackets, e.g. [::1]:{port}"
        )


def _check_name(what: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise WomlRunError(f"{what} is empty; give a name, e.g. {what}="
                           f"{NAMESPACE if what == 'namespace' else TASK_QUEUE!r}")
    if value != value.strip():
        raise WomlRunError(f"{what} {value!r} starts or ends with a space; did you mean "
                           f"{value.strip()!r}?")


# One client per loop and cluster: a temporalio client is bound to the event loop it
# was made on, and connecting costs a round trip. Values are tasks, so concurrent
# callers share one connection attempt; a failed attempt is forgotten.
_Key = tuple[str, str, bool, "str | None"]
_clients_lock = threading.Lock()
_clients: dict[asyncio.AbstractEventLoop, dict[_Key, asyncio.Task[Client]]] = {}


async def connect(options: TemporalOptions) -> Client:
    """The client for ``options`` on the running event loop, connected once and then
    reused; for ``target=None`` the local dev server is started first (in a thread).
    Raises ``WomlRunError`` if temporalio is missing or the cluster cannot be reached.
    """
    try:
        from temporalio.client import Client
    except ImportError as exc:
        raise missing("the temporalio package") from exc
    target = options.target
    if target is None:
        server = await asyncio.to_thread(local_dev_server, ui=options.ui)
        target = server.address
    loop = asyncio.get_running_loop()
    key: _Key = (target, options.namespace, options.uses_tls, options.api_key)
    with _clients_lock:
        for old in [old for old in _clients if old.is_closed()]:
            del _clients[old]
        here = _clients.setdefault(loop, {})
        task = here.get(key)
        if task is None:
            task = loop.create_task(_connect(Client, target, options))
            here[key] = task

            def forget_failure(done: asyncio.Task[Client]) -> None:
                if done.cancelled() or done.exception() is not None:
                    with _clients_lock:
                        if here.get(key) is done:
                            del here[key]

            task.add_done_callback(forget_failure)
    # shield: a caller cancelled while waiting must not cancel the others' connection.
    return await asyncio.shield(task)


async def _connect(client: type[Client], target: str, options: TemporalOptions) -> Client:
    try:
        return await client.connect(
            target,
            namespace=options.namespace,
            tls=options.uses_tls,
            api_key=options.api_key,
        )
    except RuntimeError as exc:  # temporalio's "Failed client connect: …"
        reason = str(exc)
        if "ConnectionRefused" in reason or "Connection refused" in reason:
            reason = "connection refused: is a Temporal server running there?"
        raise WomlRunError(
            f"cannot connect to the Temporal server at {target} "
            f"(namespace {options.namespace!r}): {reason}"
        ) from exc


def ui_url(options: TemporalOptions) -> str | None:
    """The Web UI of the local dev server when ``options`` use it and it runs with its
    UI; else None (a cluster of your own has its own UI). Never starts a server."""
    if options.target is not None:
        return options.web_ui
    server = running_local_dev_server()
    return None if server is None else server.ui_url
