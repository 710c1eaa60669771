"""The payment provider's TEST MODE (spec §10, §8), exercised over real HTTP on 127.0.0.1.

Every test talks to a real ``PaymentProvider`` through httpx (``trust_env=False``: no
proxy can send a request anywhere but loopback), or runs a real workflow against it.
The rules are the provider family's: a Bearer test key, form parameters with nested
keys, ``Idempotency-Key`` replayed with ``Idempotent-Replayed: true``, 400
``idempotency_error`` for a key reused with other parameters or on another endpoint,
409 while the key is in flight, and the ledger.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import woml_magic as wm
from woml_magic.demo import DemoAPIError, PaymentProvider
from woml_magic.demo.problems import ProblemError
from woml_magic.demo.provider import ECHO_CHARS, parse_form
from woml_magic.services.secrets import reference
from woml_magic.timeline import ledger_line
from woml_magic.timeline.lineage import lineage

KEY = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
CHARGE = {"amount": "2500", "currency": "eur", "source": "tok_visa", "metadata[order]": "7"}


@pytest.fixture
def provider() -> Iterator[PaymentProvider]:
    with PaymentProvider(secret_key=KEY) as server:
        yield server


@pytest.fixture
def client(provider: PaymentProvider) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=provider.url, headers=headers, timeout=10,
                      trust_env=False) as c:
        yield c


def idem(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


def error_of(response: httpx.Response, status: int, kind: str = "invalid_request_error"
             ) -> dict[str, Any]:
    """The family's error object: ``{"error": {"type", "message", ...}}`` as JSON."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == kind
    assert error["message"]
    return error


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


# -- authentication --------------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "", "Bearer", f"Token {KEY}", f"Basic {KEY}"])
def test_a_request_without_a_bearer_key_is_401_and_reaches_nothing(
    provider: PaymentProvider, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    with httpx.Client(base_url=provider.url, trust_env=False) as anonymous:
        response = anonymous.post("/v1/charges", data=CHARGE, headers=headers)
    error = error_of(response, 401)
    assert error["message"].startswith("You did not provide an API key.")
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert provider.records("charges") == []
    assert [(r.outcome, r.status) for r in provider.requests] == [("rejected", 401)]


def test_a_wrong_key_is_quoted_back_and_the_right_one_never_is(
    provider: PaymentProvider,
) -> None:
    # Providers quote the key they got: the echo WOML's scrubbing exists for (spec §10.1).
    wrong, long = KEY + "x", "sk_test_" + "z" * 60
    with httpx.Client(base_url=provider.url, trust_env=False) as c:
        typo = c.get("/v1/charges", headers={"Authorization": f"Bearer {wrong}"})
        pasted = c.get("/v1/charges", headers={"Authorization": f"bearer {long}"})
    assert error_of(typo, 401)["message"] == f"Invalid API Key provided: {wrong}"
    assert error_of(pasted, 401)["message"] == (
        f"Invalid API Key provided: {long[:ECHO_CHARS]}…"
    )
    assert KEY not in pasted.text


@pytest.mark.parametrize(("secret_key", "match"), [
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "TEST MODE"),
    ("pk_test_4eC39HqLyjWDarjtT1zdp7dc", "must start with 'sk_test_'"),
    ("sk_test_", "at least 4 more"),
    ("sk_test_ has spaces", "no spaces"),
    (b"sk_test_bytes", "must be a string"),
])
def test_only_a_test_key_is_accepted_and_the_error_never_quotes_it(
    secret_key: Any, match: str
) -> None:
    with pytest.raises(DemoAPIError, match=match) as raised:
        PaymentProvider(secret_key=secret_key)
    tail = str(secret_key)[8:]
    assert not tail or tail not in str(raised.value)


def test_the_provider_shows_no_key_and_listens_on_loopback_only() -> None:
    provider = PaymentProvider(secret_key=KEY)
    assert repr(provider) == "<PaymentProvider stopped test mode>"
    with pytest.raises(DemoAPIError, match="payment provider is not running"):
        _ = provider.url
    with provider:
        assert repr(provider) == f"<PaymentProvider {provider.url} test mode>"
        assert provider.url.startswith("http://127.0.0.1:")
    with pytest.raises(DemoAPIError, match=r"only on 127\.0\.0\.1"):
        PaymentProvider(secret_key=KEY, host="0.0.0.0")


# -- form parameters ---------------------------------------------------------------------


@pytest.mark.parametrize(("body", "params"), [
    (b"amount=2500&currency=eur", {"amount": "2500", "currency": "eur"}),
    (b"metadata[order]=7", {"metadata": {"order": "7"}}),
    (b"metadata%5Border%5D=7&metadata%5Bnote%5D=a+b", {"metadata": {"order": "7",
                                                                     "note": "a b"}}),
    (b"items[0][price]=p_1&items[0][quantity]=2&items[1][price]=p_2",
     {"items": {"0": {"price": "p_1", "quantity": "2"}, "1": {"price": "p_2"}}}),
    (b"expand[]=customer&expand[]=source", {"expand": {"0": "customer", "1": "source"}}),
    (b"description=&a[b][c][d]=deep", {"description": "", "a": {"b": {"c": {"d": "deep"}}}}),
    (b"email=ada%40example.com", {"email": "ada@example.com"}),
    (b"", {}),
])
def test_form_bodies_are_read_with_their_nesting(body: bytes, params: dict[str, Any]) -> None:
    assert parse_form(body) == params


@pytest.mark.parametrize(("body", "words"), [
    (b"a[b=1", "Invalid parameter name 'a[b'"),
    (b"a]=1", "Invalid parameter name 'a]'"),
    (b"[b]=1", "Invalid parameter name '[b]'"),
    (b"amount=1&amount=2", "'amount' was given more than once"),
    (b"metadata=x&metadata[a]=1", "treats 'metadata' as a hash"),
    (b"metadata[a]=1&metadata=x", "'metadata' was given more than once"),
    (b"name=%FF", "could not be read"),
])
def test_a_malformed_form_is_a_400_naming_the_parameter(body: bytes, words: str) -> None:
    with pytest.raises(ProblemError) as raised:
        parse_form(body)
    assert raised.value.response.status == 400
    assert words in raised.value.response.json()["error"]["message"]


def test_a_customer_and_a_charge_are_created_from_form_parameters(
    provider: PaymentProvider, client: httpx.Client
) -> None:
    customer = client.post("/v1/customers", data={"email": "ada@example.com",
                                                  "metadata[shop]": "woml"})
    assert customer.status_code == 200
    assert customer.json() == {
        "id": "cus_0001", "object": "customer", "email": "ada@example.com", "name": None,
        "description": None, "metadata": {"shop": "woml"}, "livemode": False,
        "created": customer.json()["created"],
    }
    charge = client.post("/v1/charges", data={"amount": "2500", "currency": "EUR",
                                              "customer": "cus_0001", "metadata[order]": "7"})
    assert charge.status_code == 200
    body = charge.json()
    assert (body["id"], body["object"], body["amount"], body["currency"]) == (
        "ch_0001", "charge", 2500, "eur")
    assert (body["customer"], body["metadata"], body["status"]) == (
        "cus_0001", {"order": "7"}, "succeeded")
    assert isinstance(body["created"], int)
    assert provider.records("charges") == [body]
    logged = provider.requests[-1]
    assert (logged.path, logged.outcome, logged.record_id) == ("/v1/charges", "executed",
                                                               "ch_0001")
    assert {k.lower(): v for k, v in logged.headers.items()}["content-type"] == (
        "application/x-www-form-urlencoded")
    assert logged.json == {"amount": "2500", "currency": "EUR", "customer": "cus_0001",
                           "metadata": {"order": "7"}}


@pytest.mark.parametrize(("data", "param", "words"), [
    ({"currency": "eur", "source": "tok_visa"}, "amount", "Missing required param: amount."),
    ({**CHARGE, "amount": "25.50"}, "amount", "Invalid integer: 25.50."),
    ({**CHARGE, "amount": "0"}, "amount", "from 1 to 99999999"),
    ({**CHARGE, "currency": "euro"}, "currency", "Invalid currency: euro."),
    ({**CHARGE, "capture": "false"}, "capture", "Received unknown parameter: capture."),
    ({"amount[value]": "1", "currency": "eur", "source": "tok_visa"}, "amount",
     "Invalid string for amount"),
    ({**CHARGE, "metadata[a][b]": "1"}, "metadata[a]", "metadata values are strings"),
    ({"amount": "2500", "currency": "eur"}, None, "Must provide source or customer."),
    ({**CHARGE, "customer": "cus_9999"}, "customer", "No such customer: 'cus_9999'"),
])
def test_invalid_parameters_are_a_400_naming_the_parameter_and_create_nothing(
    provider: PaymentProvider, client: httpx.Client, data: dict[str, str], param: str | None,
    words: str,
) -> None:
    error = error_of(client.post("/v1/charges", data=data), 400)
    assert words in error["message"]
    assert error.get("param") == param
    assert provider.records("charges") == []


def test_a_json_body_is_refused_the_family_reads_forms(
    provider: PaymentProvider, client: httpx.Client
) -> None:
    error = error_of(client.post("/v1/charges", json={"amount": 2500}), 400)
    assert "application/x-www-form-urlencoded" in error["message"]
    assert provider.records("charges") == []


# -- idempotency keys --------------------------------------------------------------------


def test_the_same_key_and_parameters_replay_the_stored_charge(
    provider: PaymentProvider, client: httpx.Client
) -> None:
    first = client.post("/v1/charges", data=CHARGE, headers=idem("order-7"))
    reordered = dict(reversed(list(CHARGE.items())))
    again = client.post("/v1/charges", data=reordered, headers=idem("order-7"))
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert (again.status_code, again.json()) == (200, first.json())
    assert ledger_line(provider.records("charges")) == "1 charge recorded"
    assert [r.outcome for r in provider.requests] == ["executed", "replayed"]


def test_the_same_key_with_other_parameters_is_a_400_idempotency_error(
    provider: PaymentProvider, client: httpx.Client
) -> None:
    # The IETF draft and the demo API answer 422; this family answers 400.
    client.post("/v1/charges", data=CHARGE, headers=idem("order-7"))
    changed = client.post("/v1/charges", data={**CHARGE, "amount": "2600"},
                          headers=idem("order-7"))
    error = error_of(changed, 400, "idempotency_error")
    assert "same parameters they were first used with" in error["message"]
    assert "'order-7'" in error["message"]
    assert len(provider.records("charges")) == 1
    assert [(r.outcome, r.status) for r in provider.requests] == [("executed", 200),
                                                                  ("mismatch", 400)]


def test_a_key_is_the_accounts_reusing_it_on_another_endpoint_is_a_400(
    provider: PaymentProvider, client: httpx.Client
) -> None:
    client.post("/v1/customers", data={"email": "ada@example.com"}, headers=idem("k-1"))
    reused = client.post("/v1/charges", data=CHARGE, headers=idem("k-1"))
    error = error_of(reused, 400, "idempotency_error")
    assert "same endpoint they were first used for ('/v1/customers' vs '/v1/charges')" in (
        error["message"])
    assert provider.records("charges") == []


def test_refused_parameters_are_not_stored_so_the_corrected_request_executes(
    provider: PaymentProvider, client: httpx.Client
) -> None:
    # "If incoming parameters failed validation … no idempotent result is saved."
    bad = client.post("/v1/charges", data={**CHARGE, "amount": "lots"}, headers=idem("k-2"))
    good = client.post("/v1/charges", data=CHARGE, headers=idem("k-2"))
    error_of(bad, 400)
    assert good.status_code == 200
    assert "idempotent-replayed" not in good.headers
    assert len(provider.records("charges")) == 1


def test_a_duplicate_while_the_first_is_in_flight_is_a_409(
    provider: PaymentProvider, client: httpx.Client
) -> None:
    provider.delay_next(1, 1.0)  # the charge happens, its answer is held, the key in flight
    results: list[httpx.Response] = []

    def first() -> None:
        results.append(client.post("/v1/charges", data=CHARGE, headers=idem("k-slow")))

    thread = threading.Thread(target=first)
    thread.start()
    wait_until(lambda: len(provider.records("charges")) == 1)
    with httpx.Client(base_url=provider.url, timeout=10, trust_env=False,
                      headers={"Authorization": f"Bearer {KEY}"}) as other:
        duplicate = other.post("/v1/charges", data=CHARGE, headers=idem("k-slow"))
    thread.join()
    error = error_of(duplicate, 409, "idempotency_error")
    assert error["code"] == "idempotency_key_in_use"
    assert "k-slow" in error["message"]
    later = client.post("/v1/charges", data=CHARGE, headers=idem("k-slow"))
    assert later.headers["idempotent-replayed"] == "true"
    assert later.json() == results[0].json()
    assert [r.outcome for r in provider.requests] == ["executed", "conflict", "replayed"]
    assert len(provider.records("charges")) == 1


# -- the ledger ---------------------------------------------------------------------------


def test_the_ledger_lists_every_charge_newest_first_over_http_and_in_order_in_python(
    provider: PaymentProvider, client: httpx.Client
) -> None:
    ids = [client.post("/v1/charges", data=CHARGE).json()["id"] for _ in range(3)]
    listed = client.get("/v1/charges").json()
    assert {k: listed[k] for k in ("object", "url", "has_more")} == {
        "object": "list", "url": "/v1/charges", "has_more": False}
    assert [c["id"] for c in listed["data"]] == ids[::-1]
    assert [c["id"] for c in provider.records("charges")] == ids
    assert ledger_line(provider.records("charges")) == "3 charges recorded: 2 duplicates"
    assert client.get("/v1/customers").json()["data"] == []
    provider.reset()
    assert client.get("/v1/charges").json()["data"] == []


@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/refunds"), ("GET", "/charges"),
                                              ("PUT", "/v1/charges"),
                                              ("DELETE", "/v1/customers")])
def test_anything_else_is_an_unrecognized_url(
    client: httpx.Client, method: str, path: str
) -> None:
    error = error_of(client.request(method, path), 404)
    assert error["message"].startswith(f"Unrecognized request URL ({method}: {path})")


# -- a workflow against it (spec §10) ---------------------------------------------------

CHECKOUT = """<step id="checkout" retry="3" retry-delay="100ms"><script>
const res = await services.http.request({
  method: "POST", url: `${context.payload.url}/v1/charges`,
  headers: { Authorization: "Bearer " + services.secret("PROVIDER") },
  form: { amount: 2500, currency: "eur", source: "tok_visa", metadata: { order: 7 } },
  idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey },
}, { name: "create-charge" });
return res.data.id;
</script></step>"""

ECHO = """<step id="list"><script>
try {
  await services.http.request({ url: `${context.payload.url}/v1/charges`,
    headers: { Authorization: "Bearer " + services.secret("PROVIDER") + "x" } });
} catch (e) { return e.data.error.message; }
</script></step>"""


def test_a_lost_charge_response_is_retried_and_replayed_by_the_provider(
    provider: PaymentProvider,
) -> None:
    # spec §10.2: the fault drops the answer of a charge the provider made; the keyed
    # retry is replayed (spec §10.3), the key was sent and never recorded (spec §10.1).
    run = wm.run(CHECKOUT, {"url": provider.url}, clock="simulated",
                 secrets={"PROVIDER": KEY}, faults=["create-charge@1=drop-response"])
    assert run.status == "succeeded"
    assert [u.verdict for u in lineage(run, "checkout")] == ["no-answer", "replayed"]
    assert run.steps["checkout"].result == "ch_0001"
    assert ledger_line(provider.records("charges")) == "1 charge recorded"
    assert provider.records("charges")[0]["metadata"] == {"order": "7"}
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in provider.requests)
    assert KEY not in repr(run.steps) + repr(run.events)


def test_the_providers_echo_of_the_key_is_scrubbed_before_the_script_sees_it(
    provider: PaymentProvider,
) -> None:
    run = wm.run(ECHO, {"url": provider.url}, clock="simulated", secrets={"PROVIDER": KEY})
    assert run.steps["list"].result == f"Invalid API Key provided: {reference('PROVIDER')}x"
    assert KEY not in repr(run.steps) + repr(run.events)
    assert provider.requests[0].status == 401


def test_a_key_reused_with_other_parameters_reads_rejected_in_the_lineage(
    provider: PaymentProvider,
) -> None:
    """spec §10.3: the family's 400 idempotency_error is the key's verdict (rejected as
    reused), not just an error answer."""
    doc = f"""<step id="charge" retry="2" retry-delay="0s"><script>
const amount = attempt.number === 1 ? 100 : 200;
const r = await services.http.request({{method: "POST", url: "{provider.url}/v1/charges",
  headers: {{Authorization: "Bearer " + services.secret("KEY")}},
  form: {{amount, currency: "eur", source: "tok_visa"}},
  idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}}});
if (attempt.number === 1) throw new Error("again, with another amount");
return r.data;
</script></step>"""
    run = wm.run(doc, clock="simulated", secrets={"KEY": KEY})
    uses = lineage(run, "charge")
    assert [(u.verdict, u.status) for u in uses] == [("executed", 200), ("rejected-422", 400)]
    assert "answered 400" in uses[1].reason
    assert len(provider.records("charges")) == 1
