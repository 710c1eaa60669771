"""``EngineConfig``, what a run may use (spec §3.2, §4.1, §4.5, §6.1, §10.1, §10.2),
as the engine and the API name it; it is declared with the services that use it
(``services.config``)."""

from __future__ import annotations

from ..services.cassette import RECORD_MODES, Cassette
from ..services.config import EngineConfig
from ..services.faults import Fault, parse_faults
from ..services.secrets import Secrets

# Re-exported: the API takes secrets and faults and may not reach into services.
__all__ = ["RECORD_MODES", "Cassette", "EngineConfig", "Fault", "Secrets", "parse_faults"]
