"""What a run may use: its limits, HTTP settings, secrets and injected faults (spec
§3.2, §4.1, §4.5, §6.1, §10.1, §10.2).

``EngineConfig`` is passed whole to whatever needs a part of it: ``RunServices`` (the
services of one run), the attempt (its ``limits`` travel in the ``AttemptRequest``),
the Temporal activity (the dataclass itself is its input's field, spec §9). It lives
with the services because every field but ``limits`` is theirs; the engine and the
API re-export it (``woml_magic.engine.EngineConfig``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..limits import Limits
from .cassette import Cassette
from .faults import Fault
from .secrets import Secrets


@dataclass(frozen=True)
class EngineConfig:
    """Limits and HTTP settings for a run (spec §3.2, §4.1, §6.1 configuration).

    ``limits``: every limit of a run and its attempts — the script's memory, the
    result's size, what may cross into the kernel (spec §4.5; ``woml_magic.limits``).
    ``secrets``: the values ``services.secret`` references stand for (spec §10.1); never
    in ``repr``, never compared, never sent to another engine's history. ``faults``:
    injected faults (spec §10.2), from ``services.faults.parse_faults``. ``cassette``:
    the cassette the run records its managed calls into or replays them from (spec
    §10.4); a file's state, so never compared and never sent to another engine.
    """

    redact_headers: tuple[str, ...] = ()
    http_allow: tuple[str, ...] | None = None
    limits: Limits = field(default_factory=Limits)
    secrets: Secrets | None = field(default=None, repr=False, compare=False)
    faults: tuple[Fault, ...] = ()
    cassette: Cassette | None = field(default=None, repr=False, compare=False)
