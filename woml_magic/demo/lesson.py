"""The duplicate-charge lesson, headless: the README's first command (spec §4.2, §8).

Runs the same charge twice against a real ``DemoAPI`` on 127.0.0.1 whose next
response is lost after the charge happened: once without an idempotency key (the
run fails closed through the ambiguity guard — a retry could charge twice) and once
with ``attempt.idempotencyKey`` (the retry is replayed by the server: one charge).
Prints each run's text timeline and what the server really recorded.
"""

from __future__ import annotations

from collections.abc import Callable

from ..api import run
from ..clock import ClockKind
from ..timeline import render_text
from .api import DemoAPI

_CHARGE = """\
<step id="charge" retry="3" retry-backoff="exponential" retry-delay="200ms" timeout="5s">
  <script>
    const response = await services.http.request({{
      method: "POST",
      url: "{url}/charges",
      json: {{ amount: 2500, currency: "eur" }},{idempotency}
      timeout: "2s"
    }}, {{ name: "create-charge" }});
    return response.data;
  </script>
</step>
"""

_WITH_KEY = """
      idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey },"""


def charge_document(url: str, *, with_key: bool) -> str:
    """The WOML cell of the lesson, with or without an idempotency key."""
    return _CHARGE.format(url=url, idempotency=_WITH_KEY if with_key else "")


def main(print_: Callable[[str], None] = print, clock: ClockKind = "real") -> int:
    """Run both halves of the lesson; return 0 when each behaved as the lesson says."""
    ok = True
    for with_key in (False, True):
        with DemoAPI() as api:
            api.drop_response_next(1)
            title = "WITH attempt.idempotencyKey" if with_key else "WITHOUT an idempotency key"
            print_(f"== The charge's first response is lost: {title} ==\n")
            result = run(charge_document(api.url, with_key=with_key), clock=clock)
            print_(render_text(result))
            charges = api.records("charges")
            print_(f"\nThe demo API recorded {len(charges)} charge(s).\n")
            expected = ("succeeded", 1) if with_key else ("failed", 1)
            ok = ok and (result.status, len(charges)) == expected
    print_(
        "Without a key the run failed closed (outcome `ambiguous`): a retry might have "
        "charged twice. With the key the retry was replayed by the server: one charge."
    )
    return 0 if ok else 1
