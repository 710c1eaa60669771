"""``DemoAPI``: the demo app served over HTTP on 127.0.0.1, and its lifecycle (spec §8).

``DemoApp`` (``app.py``) decides every response without a socket; ``DemoServer``
(``server.py``) frames HTTP/1.1 around it; ``DemoAPI`` is both, with ``start`` /
``stop`` and ``with``. Everything a user calls besides the lifecycle — faults,
``records``, ``requests``, ``reset`` — is ``DemoApp``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import DemoAPIError
from .app import DemoApp
from .exchange import DemoRequest
from .server import DemoServer

__all__ = ["HOST", "DemoAPI", "DemoAPIError", "DemoRequest"]

HOST = "127.0.0.1"


class DemoAPI(DemoApp):
    """A real HTTP/1.1 server on 127.0.0.1 teaching idempotency keys (spec §8).

    ``with DemoAPI() as api: api.url``. ``require_keys`` makes ``Idempotency-Key``
    mandatory on POST; ``ttl`` is how long a stored key lives, in seconds on ``clock``
    (injectable for tests); ``port`` 0 picks a free port. ``host`` exists only to
    refuse anything but 127.0.0.1: the demo never listens beyond loopback. ``log``
    receives one line per request (the command line prints them).
    """

    def __init__(
        self,
        *,
        require_keys: bool = False,
        ttl: float = 24 * 3600,
        clock: Callable[[], float] = time.monotonic,
        port: int = 0,
        host: str = HOST,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if host != HOST:
            raise DemoAPIError(
                f"host {host!r} is not allowed; the demo API listens only on {HOST} "
                "(loopback), so nothing outside this machine can reach it."
            )
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise DemoAPIError(f"port {port!r} must be an integer from 0 (any free port) to 65535.")
        super().__init__(require_keys=require_keys, ttl=ttl, clock=clock, log=log)
        self.port = port
        self.host = host
        self._server: DemoServer | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self._server is None:
            raise DemoAPIError("the demo API is not running; call start() or use `with DemoAPI()`.")
        return f"http://{HOST}:{self._server.port}"

    @property
    def running(self) -> bool:
        """Whether the server is accepting connections."""
        return self._server is not None

    def start(self) -> DemoAPI:
        """Bind 127.0.0.1:``port`` and serve in a background thread; returns ``self``."""
        if self._server is not None:
            raise DemoAPIError(f"the demo API is already running at {self.url}.")
        self._server = DemoServer(self, (HOST, self.port))
        self._server.start()
        return self

    def stop(self) -> None:
        """Shut the server down: close every connection and join every thread.

        Delayed responses are cut short. Safe to call twice.
        """
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def __enter__(self) -> DemoAPI:
        return self if self._server is not None else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"<DemoAPI {where} require_keys={self.require_keys}>"
