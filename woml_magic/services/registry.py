"""The service registry: the one place that names what ``services.*`` offers a script
(spec §4.1, §4.4, §10.1) and which kernel-side code performs each name.

The script worker builds a stub for every name in ``SERVICE_NAMES`` (and refuses any
other name a script sends); ``RunServices`` performs them for one run. Adding a
service is adding its name here and its handler to ``RunServices.handlers``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from ..errors import ServiceRejection
from ..redaction import redact_names
from .sleep import sleep_seconds

if TYPE_CHECKING:
    from ..clock import Clock
    from .config import EngineConfig
    from .http import HttpService
    from .scope import CallScope

SERVICE_NAMES: Final[tuple[str, ...]] = ("sleep", "http.request", "secret")
"""Every ``services.*`` function a script sees, dotted as the script writes it.

``secret`` is synchronous in the script: its stub answers from the names the attempt
was given (never the values) without asking the kernel (prelude.js); the handler here
is the same rule, for a stub that did ask."""

Handler = Callable[[list[Any], "CallScope"], Awaitable[Any]]


class RunServices:
    """The services of one run (spec §4): made with the run, closed with it.

    The HTTP client is made on first use (its TLS setup costs ~15 ms) and closed by
    ``aclose`` (spec §4.1).
    """

    def __init__(
        self,
        clock: Clock,
        config: EngineConfig,
        *,
        http: HttpService | None = None,
    ) -> None:
        """``config``: the run's limits, HTTP settings, secrets and faults, whole.
        ``http``: the ``HttpService`` that performs ``services.http.request``, given
        instead of made (a lab shares one among its clients, spec §11, its transport
        perhaps the server model); whoever gave it closes it."""
        self._clock = clock
        self._config = config
        self._given_http = http
        self._http: HttpService | None = None
        self.handlers: dict[str, Handler] = {
            "sleep": self._sleep,
            "http.request": self._http_request,
            "secret": self._secret,
        }
        if tuple(self.handlers) != SERVICE_NAMES:
            raise RuntimeError(
                f"RunServices handles {tuple(self.handlers)} but SERVICE_NAMES says "
                f"{SERVICE_NAMES}; they must name the same services"
            )

    async def call(self, name: str, args: list[Any], scope: CallScope) -> Any:
        """Perform ``services.<name>(*args)`` for the attempt ``scope`` describes."""
        handler = self.handlers.get(name)
        if handler is None:
            raise ServiceRejection("TypeError", f"services has no {name!r}")
        return await handler(args, scope)

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def _sleep(self, args: list[Any], scope: CallScope) -> None:
        await self._clock.sleep(sleep_seconds(args))

    async def _http_request(self, args: list[Any], scope: CallScope) -> Any:
        request = args[0] if args else None
        options = args[1] if len(args) > 1 else None
        return await self._http_service().request(request, options, scope)

    async def _secret(self, args: list[Any], scope: CallScope) -> str:
        from .secrets import secret_reference

        return secret_reference(args, self._config.secrets)

    def _http_service(self) -> HttpService:
        if self._given_http is not None:
            return self._given_http
        if self._http is None:
            from .http import HttpService

            config = self._config
            self._http = HttpService(
                redact=redact_names(config.redact_headers),
                allow_hosts=config.http_allow,
                max_response_bytes=config.limits.max_response_bytes,
                max_json_depth=config.limits.max_json_depth,
                secrets=config.secrets,
                faults=config.faults,
                cassette=config.cassette,
            )
        return self._http
