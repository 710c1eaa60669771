"""What a run may use: limits, HTTP settings, secrets and injected faults (spec §3.2,
§4.1, §4.5, §6.1, §10.1, §10.2)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..limits import DEFAULT_MAX_RESULT_BYTES, DEFAULT_MEMORY_LIMIT_MB, Limits
from ..services.cassette import Cassette
from ..services.faults import Fault, parse_faults
from ..services.secrets import Secrets

# Re-exported: the API takes secrets and faults and may not reach into services.
__all__ = ["Cassette", "EngineConfig", "Fault", "Secrets", "parse_faults"]


@dataclass(frozen=True)
class EngineConfig:
    """Limits and HTTP settings for a run (spec §3.2, §4.1, §6.1 configuration).

    ``secrets``: the values ``services.secret`` references stand for (spec §10.1); never
    in ``repr``, never compared, never sent to another engine's history. ``faults``:
    injected faults (spec §10.2), from ``services.faults.parse_faults``. ``cassette``:
    the cassette the run records its managed calls into or replays them from (spec
    §10.4); a file's state, so never compared and never sent to another engine.
    """

    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    redact_headers: tuple[str, ...] = ()
    http_allow: tuple[str, ...] | None = None
    #: What may cross into the kernel (spec §4.5): payload, JSON depth, console,
    #: service-call arguments, response bodies.
    limits: Limits = field(default_factory=Limits)
    secrets: Secrets | None = field(default=None, repr=False, compare=False)
    faults: tuple[Fault, ...] = ()
    cassette: Cassette | None = field(default=None, repr=False, compare=False)
