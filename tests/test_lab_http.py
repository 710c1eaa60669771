"""The lab's HTTP is the run's HTTP (spec §4.1, §10.1, §10.2, §11; STYLE 13).

A lab client's ``services.http.request`` goes through the one ``HttpService`` with the
server model as its transport (``lab.model_http.ModelTransport``): the allow-list,
injected faults, secrets and their scrubbing, and the response caps act in a lab as in
a plain run. The equivalence test runs one workflow twice — as a lab client against the
model, and as a plain ``wm.run`` against the same model served over real HTTP on
127.0.0.1 — and compares what the runs recorded.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

import woml_magic as wm
from woml_magic.clock import SimulatedClock
from woml_magic.engine import EngineConfig
from woml_magic.errors import ServiceRejection
from woml_magic.lab.labclock import lab_clock
from woml_magic.lab.model_http import ModelExchange, ModelTransport, lab_http
from woml_magic.lab.server import ModelServer, ServerState
from woml_magic.limits import Limits
from woml_magic.services import CallScope, StepCalls
from woml_magic.services.scope import CALL_EXTENSION, CallTag

SECRET = "s3cr3t-token-4242"

#: A keyed, named call with a secret in its URL (the model echoes the path) and its
#: Authorization header; attempt 1's response is dropped by a fault, attempt 2 waits
#: an injected delay first.
DOC = """<step id="charge" retry="3" retry-delay="2s"><script>
const token = services.secret("TOKEN");
const r = await services.http.request({
  method: "POST", url: context.payload.api + "/charges/" + token,
  headers: {Authorization: "Bearer " + token}, json: {amount: 100},
  idempotency: {header: "Idempotency-Key", value: attempt.idempotencyKey}
}, {name: "create"});
return r.data;
</script></step>"""
FAULTS = ["create@1=drop-response", "create@2=delay=1s"]


class _ModelOverHttp(BaseHTTPRequestHandler):
    """The server model answering real HTTP: the plain run's equivalent server."""

    state: ServerState
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        with self.lock:
            answer = self.state.handle(0.0, 0, "POST", self.path.split("?")[0],
                                       json.loads(body or b"null"))
        data = json.dumps(answer.data).encode()
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the runs, not the server's log."""


@pytest.fixture
def model_api() -> Iterator[str]:
    handler = type("Handler", (_ModelOverHttp,), {"state": ModelServer().start()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def recorded(run: wm.Run, base_url: str) -> list[tuple[Any, ...]]:
    """What a run recorded of its calls and attempts, with the base URL as ``API``
    (times are the clocks' own: the lab's does not move while scripts run)."""
    out: list[tuple[Any, ...]] = []
    for attempt in run.steps["charge"].attempts:
        error = attempt.error
        out.append(("attempt", attempt.number, attempt.outcome,
                    error and error.name, error and error.message.replace(base_url, "API")))
        for call in attempt.calls:
            out.append(("call", call.name, call.outcome, call.status, call.injected,
                        call.url.replace(base_url, "API"), call.request_headers,
                        (call.error or "").replace(base_url, "API"),
                        json.dumps(_model_part(call.response)).replace(base_url, "API")))
    return out


def _model_part(response: Any) -> Any:
    """A recorded response without the headers an HTTP server adds of its own."""
    if not isinstance(response, dict):
        return response
    headers = {k: v for k, v in response["headers"].items() if k not in _SERVER_HEADERS}
    return {**response, "headers": headers}


_SERVER_HEADERS = ("server", "date", "content-length")


def test_a_lab_client_with_a_fault_and_a_secret_records_what_a_plain_run_does(
    model_api: str,
) -> None:
    """spec §10.1, §10.2, §11: one pipeline, so the fault acts, the secret is sent and
    scrubbed from the model's echo, and the records match a plain run's."""
    lab = wm.lab(DOC, clients=1, seed=0, faults=FAULTS, secrets={"TOKEN": SECRET}, sample=0)
    plain = wm.run(DOC, payload={"client": 0, "api": model_api}, clock="simulated",
                   run_id="lab-0-0", journal=":memory:", faults=FAULTS,
                   secrets={"TOKEN": SECRET})
    [client] = lab.runs
    assert recorded(client, "http://model.lab") == recorded(plain, model_api)
    step = client.steps["charge"]
    assert [a.outcome for a in step.attempts] == ["threw", "succeeded"]
    assert [c.injected for a in step.attempts for c in a.calls] == [
        "drop-response (--fault create@1=drop-response)", "delay=1s (--fault create@2=delay=1s)"]
    assert step.attempts[1].started_at == 2.0
    assert step.attempts[1].calls[0].ended_at == 3.0  # the delay, on the lab's clock
    # The model saw the value; the script, the journal and the Run see the reference.
    assert [r.attempt for r in lab.traffic] == [1, 2]
    assert step.result["path"] == "/charges/⟦woml-secret:TOKEN⟧"
    assert step.attempts[0].calls[0].request_headers["Authorization"] == "•••"
    assert SECRET not in json.dumps([e.to_dict() for e in client.events])
    assert step.result == plain.steps["charge"].result | {"path": step.result["path"]}


def test_a_lab_with_faults_stays_deterministic() -> None:
    doc = DOC.replace('retry="3"', 'retry="4" retry-backoff="exponential"')
    faults = ["create@*=delay=500ms", "create@2=status=503", "create@1=timeout-after-send"]
    first = wm.lab(doc, clients=12, seed=5, capacity=3, faults=faults,
                   secrets={"TOKEN": SECRET}, sample=0)
    # The same workers: a delay holds its worker, as services.sleep does (runner.py).
    again = wm.lab(doc, clients=12, seed=5, capacity=3, faults=faults,
                   secrets={"TOKEN": SECRET}, sample=0)
    assert first.deterministic
    assert first.traffic == again.traffic
    assert [recorded(r, "") for r in first.runs] == [recorded(r, "") for r in again.runs]
    # status=503 is answered by the fault, never sent: attempts 1 and 3+ reach the model.
    assert {r.attempt for r in first.traffic} >= {1, 3}
    assert 2 not in {r.attempt for r in first.traffic}


def _model_exchange() -> tuple[SimulatedClock, ModelExchange]:
    clock = lab_clock()
    exchange = ModelExchange(ModelServer().start(), clock, random.Random(0))
    clock.set_on_idle(exchange.flush)
    return clock, exchange


@pytest.mark.parametrize(
    ("config", "name", "props"),
    [
        (EngineConfig(limits=Limits(max_response_bytes=8)), "ResponseTooLargeError",
         {"limit": 8, "status": 201}),
        (EngineConfig(http_allow=("api.test",)), "NetworkError",
         {"blocked": True, "host": "model.lab"}),
    ],
    ids=["response-cap", "allow-list"],
)
def test_the_allow_list_and_the_response_cap_act_in_front_of_the_model(
    config: EngineConfig, name: str, props: dict[str, Any]
) -> None:
    """spec §4.1, §4.5: what HttpService refuses, it refuses in front of the model too."""

    async def go() -> ServiceRejection:
        clock, exchange = _model_exchange()
        service = lab_http(config, exchange, {"lab-0-0": 0})
        scope = CallScope("lab-0-0", "s", 1, StepCalls(), emit=lambda e: None,
                          now=clock.now, busy=clock.busy)
        try:
            with pytest.raises(ServiceRejection) as caught:
                await service.request({"method": "POST", "url": "http://model.lab/x"},
                                      None, scope)
        finally:
            await service.aclose()
        return caught.value

    rejection = asyncio.run(go())
    assert rejection.name == name
    assert props.items() <= rejection.props.items()


def test_the_model_transport_answers_only_the_labs_clients() -> None:
    """A request without a lab client's CallTag is an internal error, not an answer."""

    async def go() -> None:
        _, exchange = _model_exchange()
        transport = ModelTransport(exchange, {"lab-0-0": 0})
        async with httpx.AsyncClient(transport=transport) as client:
            with pytest.raises(RuntimeError, match="came from no lab client"):
                await client.post("http://model.lab/x")
            stranger = CallTag("run-x", "s", 1, 0, None)
            with pytest.raises(RuntimeError, match="came from no lab client"):
                await client.post("http://model.lab/x", extensions={CALL_EXTENSION: stranger})

    asyncio.run(go())
