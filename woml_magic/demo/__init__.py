"""The demo API: a real HTTP server on 127.0.0.1 that teaches idempotency (spec §8).

    from woml_magic.demo import DemoAPI
    with DemoAPI() as api:
        api.drop_response_next(1)        # the charge happens, the client hears nothing
        ...                              # a workflow POSTs {api.url}/charges
        api.records("charges")           # what really happened, duplicates included

``POST /customers`` and ``POST /charges`` create records; ``GET`` lists them. The
``Idempotency-Key`` header follows the IETF draft and Stripe: a repeat with the same
key and body replays the stored response (``Idempotent-Replayed: true``), a different
body is 422, a repeat while the first is in flight is 409. Faults (``fail_next``,
``drop_response_next``, ``delay_next``) stage the failures a retry policy must
survive. ``app.py`` decides every response without a socket (``DemoApp``);
``server.py`` is the HTTP layer, and says why it is ``http.server``'s threaded server.
``ProviderRecording`` is a provider as cassettes recorded it, for a notebook that runs
offline (spec §10.4). ``python -m woml_magic.demo`` serves it from the command line.
Docs: docs/demo-api.md.
"""

from __future__ import annotations

from ..errors import DemoAPIError
from .api import DemoAPI
from .exchange import DemoRequest
from .provider import PaymentProvider
from .recording import ProviderRecording, RecordedRequest

__all__ = ["DemoAPI", "DemoAPIError", "DemoRequest", "PaymentProvider", "ProviderRecording",
           "RecordedRequest"]
