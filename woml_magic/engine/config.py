"""What a run may use: limits and HTTP settings (spec §3.2, §4.1, §4.5, §6.1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..limits import DEFAULT_MAX_RESULT_BYTES, DEFAULT_MEMORY_LIMIT_MB, Limits


@dataclass(frozen=True)
class EngineConfig:
    """Limits and HTTP settings for a run (spec §3.2, §4.1, §6.1 configuration)."""

    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    redact_headers: tuple[str, ...] = ()
    http_allow: tuple[str, ...] | None = None
    #: What may cross into the kernel (spec §4.5): payload, JSON depth, console,
    #: service-call arguments, response bodies.
    limits: Limits = field(default_factory=Limits)
