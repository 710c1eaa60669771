"""``services.sleep(duration)``: wait on the run's clock (spec §4.4).

On a simulated clock the wait takes no real time; on the real clock it is a real wait.
The attempt's timeout still applies while it sleeps.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ServiceRejection
from ..policy import DurationError, parse_duration

#: The longest sleep a script may ask for (spec §4.4).
MAX_SLEEP_SECONDS = 24 * 3600.0


def sleep_seconds(args: list[Any]) -> float:
    """The seconds ``services.sleep(*args)`` asks for: a duration string or milliseconds
    (spec §4.4); ``ServiceRejection`` saying what is allowed otherwise."""
    allowed = "pass a duration such as \"250ms\" or \"2s\", or a number of milliseconds"
    if not args:
        raise ServiceRejection("TypeError", f"services.sleep needs a duration; {allowed}")
    value = args[0]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ServiceRejection("TypeError", f"services.sleep got {json.dumps(value)}; {allowed}")
    if isinstance(value, str):
        try:
            seconds = parse_duration(value).total_seconds()
        except DurationError as exc:
            raise ServiceRejection("TypeError", f"services.sleep: {exc}") from None
    else:
        seconds = float(value) / 1000.0
    if not 0 <= seconds <= MAX_SLEEP_SECONDS:
        raise ServiceRejection("RangeError",
                               f"services.sleep got {value!r}; it must be between 0 and 24h")
    return seconds
