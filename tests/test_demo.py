"""The demo API (spec §8), exercised over real HTTP on 127.0.0.1.

Every test talks to a real ``DemoAPI`` server through httpx, http.client or a raw
socket; nothing is mocked. Clients use ``trust_env=False`` so no proxy setting can
send a request anywhere but loopback.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from woml_magic.demo import DemoAPI, DemoAPIError
from woml_magic.demo.app import DemoApp
from woml_magic.errors import WomlError

CHARGE = {"amount": 1000, "currency": "usd"}


@pytest.fixture
def api() -> Iterator[DemoAPI]:
    with DemoAPI() as server:
        yield server


@pytest.fixture
def client(api: DemoAPI) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=10, trust_env=False) as c:
        yield c


def key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """spec §8: errors are application/problem+json with type, title, status, detail."""
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["status"] == status
    assert body["detail"].endswith(".")
    return body


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll until ``predicate()`` holds; a synchronisation aid, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


def raw_exchange(api: DemoAPI, request: bytes) -> bytes:
    """Send bytes on a fresh connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", int(api.url.rsplit(":", 1)[1])), 10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


# -- records (spec §8) ------------------------------------------------------------


def test_post_customers_answers_201_with_the_record_and_a_new_id(
    api: DemoAPI, client: httpx.Client
) -> None:
    response = client.post("/customers", json={"email": "ada@example.com", "name": "Ada"})
    assert response.status_code == 201
    assert response.headers["content-type"] == "application/json"
    record = response.json()
    assert record["id"] == "cus_0001"
    assert (record["email"], record["name"], record["object"]) == (
        "ada@example.com",
        "Ada",
        "customer",
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["created"])
    assert api.records("customers") == [record]


def test_post_charges_gives_sequential_ids_and_links_an_existing_customer(
    api: DemoAPI, client: httpx.Client
) -> None:
    customer = client.post("/customers", json={"email": "ada@example.com"}).json()
    first = client.post("/charges", json={**CHARGE, "customer": customer["id"]}).json()
    second = client.post("/charges", json={"amount": 5, "currency": "EUR"}).json()
    assert [first["id"], second["id"]] == ["ch_0001", "ch_0002"]
    assert first["customer"] == customer["id"]
    assert second["currency"] == "eur"  # stored lower-case, as Stripe does
    assert [r["id"] for r in api.records("charges")] == ["ch_0001", "ch_0002"]


def test_get_lists_every_record_under_data(client: httpx.Client) -> None:
    assert client.get("/charges").json() == {"data": []}
    created = [client.post("/charges", json={**CHARGE, "amount": n}).json() for n in (1, 2)]
    listed = client.get("/charges")
    assert listed.status_code == 200
    assert listed.json() == {"data": created}
    assert client.get("/customers").json() == {"data": []}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/customers", {}, "email"),
        ("/customers", {"email": 7}, "email"),
        ("/customers", {"email": "no-at-sign"}, "email"),
        ("/customers", {"email": "a@b.c", "name": 3}, "name"),
        ("/customers", {"email": "a@b.c", "phone": "1"}, "phone"),
        ("/charges", {"currency": "usd"}, "amount"),
        ("/charges", {"amount": 0, "currency": "usd"}, "amount"),
        ("/charges", {"amount": -5, "currency": "usd"}, "amount"),
        ("/charges", {"amount": 1.5, "currency": "usd"}, "amount"),
        ("/charges", {"amount": "100", "currency": "usd"}, "amount"),
        ("/charges", {"amount": True, "currency": "usd"}, "amount"),
        ("/charges", {"amount": 100, "currency": "us"}, "currency"),
        ("/charges", {"amount": 100, "currency": "12$"}, "currency"),
        ("/charges", {"amount": 100, "currency": "usd", "customer": "cus_9999"}, "customer"),
        ("/charges", {"amount": 100, "currency": "usd", "customer": 1}, "customer"),
    ],
)
def test_invalid_body_is_a_400_problem_naming_the_field(
    api: DemoAPI, client: httpx.Client, path: str, body: dict[str, Any], field: str
) -> None:
    problem = assert_problem(client.post(path, json=body), 400)
    assert problem["field"] == field
    assert field in problem["detail"]
    assert api.records(path[1:]) == []


def test_body_that_is_not_an_object_is_a_400_problem(client: httpx.Client) -> None:
    assert_problem(client.post("/charges", json=[1000, "usd"]), 400)


def test_non_json_content_type_is_a_415_problem(api: DemoAPI, client: httpx.Client) -> None:
    response = client.post(
        "/charges", content=b"amount=1000", headers={"Content-Type": "text/plain"}
    )
    assert "application/json" in assert_problem(response, 415)["detail"]
    assert response.headers["accept-post"] == "application/json"
    assert api.records("charges") == []


@pytest.mark.parametrize("body", [b"{not json", b'{"amount": NaN, "currency": "usd"}', b"\xff"])
def test_malformed_json_is_a_400_problem(client: httpx.Client, body: bytes) -> None:
    response = client.post("/charges", content=body, headers={"Content-Type": "application/json"})
    assert assert_problem(response, 400)["title"] == "Malformed JSON"


def test_json_with_a_charset_parameter_is_accepted(client: httpx.Client) -> None:
    response = client.post(
        "/charges",
        content=json.dumps(CHARGE).encode(),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 201


def test_unknown_path_is_a_404_problem(client: httpx.Client) -> None:
    for method in ("GET", "POST"):
        assert "/refunds" in assert_problem(client.request(method, "/refunds"), 404)["detail"]


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "HEAD"])
def test_wrong_method_is_a_405_problem_with_allow(client: httpx.Client, method: str) -> None:
    response = client.request(method, "/charges")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    if method != "HEAD":  # a HEAD response carries headers only for the client
        assert_problem(response, 405)


# -- idempotency (spec §8) ------------------------------------------------------


def test_repeat_with_same_key_and_body_replays_without_executing(
    api: DemoAPI, client: httpx.Client
) -> None:
    first = client.post("/charges", json=CHARGE, headers=key("k-1"))
    again = client.post("/charges", json=CHARGE, headers=key("k-1"))
    assert first.status_code == again.status_code == 201
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert len(api.records("charges")) == 1
    assert [r.outcome for r in api.requests] == ["executed", "replayed"]


def test_fingerprint_ignores_key_order_and_whitespace(api: DemoAPI, client: httpx.Client) -> None:
    client.post("/charges", json={"amount": 1000, "currency": "usd"}, headers=key("k"))
    reordered = b'{ "currency" : "usd",\n "amount": 1000 }'
    again = client.post(
        "/charges",
        content=reordered,
        headers={**key("k"), "Content-Type": "application/json"},
    )
    assert again.headers["idempotent-replayed"] == "true"
    assert len(api.records("charges")) == 1


def test_quoted_structured_field_key_means_the_same_key(api: DemoAPI, client: httpx.Client) -> None:
    client.post("/charges", json=CHARGE, headers=key("abc"))
    again = client.post("/charges", json=CHARGE, headers=key('"abc"'))
    assert again.headers["idempotent-replayed"] == "true"
    assert [r.idempotency_key for r in api.requests] == ["abc", "abc"]
    assert len(api.records("charges")) == 1


def test_quoted_key_unescapes_backslash_escapes(api: DemoAPI, client: httpx.Client) -> None:
    client.post("/charges", json=CHARGE, headers=key('"a\\"b\\\\c"'))
    assert api.requests[0].idempotency_key == 'a"b\\c'


def test_same_key_with_different_body_is_a_422_problem(api: DemoAPI, client: httpx.Client) -> None:
    client.post("/charges", json=CHARGE, headers=key("k-1"))
    response = client.post("/charges", json={**CHARGE, "amount": 999}, headers=key("k-1"))
    assert "k-1" in assert_problem(response, 422)["detail"]
    assert len(api.records("charges")) == 1
    assert api.requests[-1].outcome == "mismatch"


def test_keys_are_scoped_by_method_and_path(api: DemoAPI, client: httpx.Client) -> None:
    client.post("/customers", json={"email": "a@b.c"}, headers=key("shared"))
    charge = client.post("/charges", json=CHARGE, headers=key("shared"))
    assert charge.status_code == 201
    assert "idempotent-replayed" not in charge.headers


def test_validation_error_is_stored_and_replayed_under_its_key(
    api: DemoAPI, client: httpx.Client
) -> None:
    bad = {"amount": 0, "currency": "usd"}
    first = client.post("/charges", json=bad, headers=key("k-bad"))
    again = client.post("/charges", json=bad, headers=key("k-bad"))
    assert_problem(first, 400)
    assert_problem(again, 400)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert [r.outcome for r in api.requests] == ["executed", "replayed"]


@pytest.mark.parametrize(
    ("header_value", "fragment"),
    [
        (b"", b"empty"),
        (b'""', b"empty"),
        (b"k" * 256, b"256 characters"),
        (b"a\x7fb", b"printable ASCII"),
        (b"caf\xc3\xa9", b"printable ASCII"),
        (b'"abc', b"quoted string"),
        (b'"a"b"', b"quoted string"),
        (b'"a\\x"', b"quoted string"),
    ],
)
def test_malformed_key_is_a_400_problem(api: DemoAPI, header_value: bytes, fragment: bytes) -> None:
    body = json.dumps(CHARGE).encode()
    reply = raw_exchange(
        api,
        b"POST /charges HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nIdempotency-Key: " + header_value + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body,
    )
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert b"application/problem+json" in reply
    assert fragment in reply
    assert api.records("charges") == []


def test_key_of_255_characters_is_accepted(client: httpx.Client) -> None:
    assert client.post("/charges", json=CHARGE, headers=key("k" * 255)).status_code == 201


def test_repeated_key_header_is_a_400_problem(api: DemoAPI) -> None:
    with httpx.Client(base_url=api.url, trust_env=False) as client:
        response = client.post(
            "/charges", json=CHARGE, headers=[("Idempotency-Key", "a"), ("Idempotency-Key", "b")]
        )
    assert "2 times" in assert_problem(response, 400)["detail"]


def test_duplicate_while_first_is_in_flight_is_a_409_with_retry_after(
    api: DemoAPI, client: httpx.Client
) -> None:
    api.delay_next(1, 2.0)  # hold the first request in flight after its effect
    results: list[httpx.Response] = []

    def first() -> None:
        with httpx.Client(base_url=api.url, timeout=10, trust_env=False) as other:
            results.append(other.post("/charges", json=CHARGE, headers=key("k-slow")))

    thread = threading.Thread(target=first)
    thread.start()
    wait_until(lambda: len(api.records("charges")) == 1)
    duplicate = client.post("/charges", json=CHARGE, headers=key("k-slow"))
    thread.join()
    assert "k-slow" in assert_problem(duplicate, 409)["detail"]
    assert duplicate.headers["retry-after"] == "1"
    assert results[0].status_code == 201
    later = client.post("/charges", json=CHARGE, headers=key("k-slow"))
    assert later.headers["idempotent-replayed"] == "true"
    assert later.json() == results[0].json()
    assert len(api.records("charges")) == 1
    assert [r.outcome for r in api.requests] == ["executed", "conflict", "replayed"]


def test_require_keys_refuses_a_post_without_a_key_with_400() -> None:
    with (
        DemoAPI(require_keys=True) as api,
        httpx.Client(base_url=api.url, trust_env=False) as client,
    ):
        missing = client.post("/charges", json=CHARGE)
        assert "Idempotency-Key" in assert_problem(missing, 400)["detail"]
        assert api.records("charges") == []
        assert client.post("/charges", json=CHARGE, headers=key("k")).status_code == 201
        assert client.get("/charges").status_code == 200  # reads need no key


def test_without_require_keys_a_post_without_key_executes_every_time(
    api: DemoAPI, client: httpx.Client
) -> None:
    client.post("/charges", json=CHARGE)
    client.post("/charges", json=CHARGE)
    assert len(api.records("charges")) == 2  # the duplicate charge the keys prevent


class FakeClock:
    """A clock the test moves by hand (spec §8: keys expire after a TTL)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_key_expires_after_ttl_on_the_injected_clock() -> None:
    clock = FakeClock()
    with (
        DemoAPI(ttl=60, clock=clock) as api,
        httpx.Client(base_url=api.url, trust_env=False) as client,
    ):
        client.post("/charges", json=CHARGE, headers=key("k"))
        clock.now += 59.5
        assert (
            client.post("/charges", json=CHARGE, headers=key("k")).headers.get(
                "idempotent-replayed"
            )
            == "true"
        )
        clock.now += 0.5  # exactly ttl after the key was stored
        fresh = client.post("/charges", json=CHARGE, headers=key("k"))
        assert "idempotent-replayed" not in fresh.headers
        assert fresh.json()["id"] == "ch_0002"
        assert [r.outcome for r in api.requests] == ["executed", "replayed", "executed"]


def test_expired_key_accepts_a_different_body() -> None:
    clock = FakeClock()
    with (
        DemoAPI(ttl=10, clock=clock) as api,
        httpx.Client(base_url=api.url, trust_env=False) as client,
    ):
        client.post("/charges", json=CHARGE, headers=key("k"))
        clock.now += 10
        other = client.post("/charges", json={**CHARGE, "amount": 1}, headers=key("k"))
        assert other.status_code == 201
        assert len(api.records("charges")) == 2


# -- faults (spec §8) -------------------------------------------------------------


def test_fail_next_answers_before_execution_and_stores_nothing(
    api: DemoAPI, client: httpx.Client
) -> None:
    api.fail_next(1)
    failed = client.post("/charges", json=CHARGE, headers=key("k"))
    assert assert_problem(failed, 503)["title"] == "Injected fault"
    assert api.records("charges") == []
    retry = client.post("/charges", json=CHARGE, headers=key("k"))
    assert retry.status_code == 201
    assert "idempotent-replayed" not in retry.headers
    assert len(api.records("charges")) == 1
    assert [(r.outcome, r.fault) for r in api.requests] == [
        ("failed-injected", "fail"),
        ("executed", None),
    ]


def test_fail_next_counts_n_requests_on_any_endpoint_with_the_given_status(
    api: DemoAPI, client: httpx.Client
) -> None:
    api.fail_next(2, status=429)
    assert_problem(client.get("/customers"), 429)
    assert_problem(client.post("/charges", json=CHARGE), 429)
    assert client.post("/charges", json=CHARGE).status_code == 201


def test_faults_apply_in_the_order_they_were_queued(api: DemoAPI, client: httpx.Client) -> None:
    api.drop_response_next(1)
    api.fail_next(1)
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/charges", json=CHARGE)
    assert client.post("/charges", json=CHARGE).status_code == 503
    assert client.post("/charges", json=CHARGE).status_code == 201
    assert [r.fault for r in api.requests] == ["drop", "fail", None]


def test_drop_response_next_executes_stores_and_disconnects_then_retry_replays(
    api: DemoAPI, client: httpx.Client
) -> None:
    api.drop_response_next(1)
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/charges", json=CHARGE, headers=key("k-drop"))
    assert len(api.records("charges")) == 1  # the effect happened
    retry = client.post("/charges", json=CHARGE, headers=key("k-drop"))
    assert retry.status_code == 201
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json() == api.records("charges")[0]
    assert len(api.records("charges")) == 1
    assert [r.outcome for r in api.requests] == ["dropped", "replayed"]


def test_drop_without_a_key_then_retry_charges_twice(api: DemoAPI, client: httpx.Client) -> None:
    api.drop_response_next(1)
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/charges", json=CHARGE)
    client.post("/charges", json=CHARGE)
    assert len(api.records("charges")) == 2  # the lesson: a blind retry duplicates


def test_dropped_response_sends_not_one_byte(api: DemoAPI) -> None:
    api.drop_response_next(1)
    body = json.dumps(CHARGE).encode()
    reply = raw_exchange(
        api,
        b"POST /charges HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body,
    )
    assert reply == b""
    assert len(api.records("charges")) == 1


def test_delay_next_executes_first_so_a_client_timeout_is_ambiguous(api: DemoAPI) -> None:
    api.delay_next(1, 30.0)  # cut short by stop() at the end of the test
    with httpx.Client(base_url=api.url, timeout=0.3, trust_env=False) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            impatient.post("/charges", json=CHARGE, headers=key("k"))
        assert len(api.records("charges")) == 1  # the charge exists; the client never heard
        held = api.requests[0]
        assert (held.outcome, held.answered, held.delay) == ("executed", False, 30.0)
        # The retry a client makes after its timeout finds the key still in flight.
        retry = impatient.post("/charges", json=CHARGE, headers=key("k"))
        assert_problem(retry, 409)
    assert len(api.records("charges")) == 1


def test_delay_next_still_answers_with_the_response(api: DemoAPI, client: httpx.Client) -> None:
    api.delay_next(1, 0.05)
    response = client.post("/charges", json=CHARGE)
    assert response.status_code == 201
    assert (api.requests[0].outcome, api.requests[0].fault) == ("executed", "delay")
    assert api.requests[0].answered


def test_delayed_request_does_not_block_other_connections(
    api: DemoAPI, client: httpx.Client
) -> None:
    api.delay_next(1, 30.0)
    with httpx.Client(base_url=api.url, timeout=0.3, trust_env=False) as slow:
        with pytest.raises(httpx.ReadTimeout):
            slow.get("/charges")
        assert client.get("/customers").status_code == 200


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: a.fail_next(0), "positive integer"),
        (lambda a: a.fail_next(1, status=200), "400 to 599"),
        (lambda a: a.drop_response_next(-1), "positive integer"),
        (lambda a: a.delay_next(1, -1), "0 to 3600"),
        (lambda a: a.records("refunds"), "customers, charges"),
    ],
)
def test_misuse_raises_a_demo_api_error_that_names_the_value(
    call: Callable[[DemoAPI], object], message: str
) -> None:
    api = DemoAPI()  # never started: misuse is refused before any request
    with pytest.raises(DemoAPIError, match=message):
        call(api)


# -- inspection --------------------------------------------------------------------


def test_requests_record_method_path_headers_json_key_and_outcome(
    api: DemoAPI, client: httpx.Client
) -> None:
    client.post("/charges", json=CHARGE, headers={**key("k"), "X-Trace": "t1"})
    (request,) = api.requests
    assert (request.method, request.path, request.json) == ("POST", "/charges", CHARGE)
    assert request.headers["X-Trace"] == "t1"
    assert (request.idempotency_key, request.outcome, request.status) == ("k", "executed", 201)
    assert request.record_id == "ch_0001"


def test_records_returns_a_copy(api: DemoAPI, client: httpx.Client) -> None:
    client.post("/charges", json=CHARGE)
    api.records("charges")[0]["amount"] = 1
    api.records("charges").clear()
    assert api.records("charges")[0]["amount"] == 1000


def test_reset_forgets_records_requests_keys_and_faults(api: DemoAPI, client: httpx.Client) -> None:
    client.post("/charges", json=CHARGE, headers=key("k"))
    api.fail_next(3)
    api.reset()
    assert api.records("charges") == []
    assert api.requests == []
    fresh = client.post("/charges", json=CHARGE, headers=key("k"))
    assert fresh.status_code == 201
    assert "idempotent-replayed" not in fresh.headers
    assert fresh.json()["id"] == "ch_0001"


# -- without a socket ----------------------------------------------------------------


def test_the_app_decides_every_response_without_a_socket() -> None:
    # The HTTP layer only frames DemoApp's public state machine: begin → finish.
    app = DemoApp()
    headers = {"Content-Type": "application/json", "Idempotency-Key": "k1"}
    body = json.dumps(CHARGE).encode()
    first = app.begin("POST", "/charges", headers, ["k1"], body)
    in_flight = app.begin("POST", "/charges", headers, ["k1"], body)  # before first finishes
    app.finish(in_flight)
    app.finish(first)
    app.drop_response_next(1)
    replay = app.begin("POST", "/charges", headers, ["k1"], body)
    app.finish(replay)
    assert (first.response.status, in_flight.response.status) == (201, 409)
    assert (replay.response.status, replay.response.body) == (201, first.response.body)
    assert ("Idempotent-Replayed", "true") in replay.response.headers
    assert (replay.drop, first.drop) == (True, False)
    assert [(r.outcome, r.answered) for r in app.requests] == [
        ("executed", True),
        ("conflict", True),
        ("dropped", False),
    ]
    assert len(app.records("charges")) == 1


# -- HTTP/1.1 behaviour ---------------------------------------------------------------


def test_keep_alive_serves_several_requests_on_one_connection(api: DemoAPI) -> None:
    host, port = api.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        answers = []
        for amount in (1, 2, 3):
            connection.request(
                "POST",
                "/charges",
                json.dumps({**CHARGE, "amount": amount}),
                {"Content-Type": "application/json"},
            )
            answers.append(connection.getresponse().read())
            assert connection.sock is not None  # still open: the server kept it alive
        assert [json.loads(a)["amount"] for a in answers] == [1, 2, 3]
    finally:
        connection.close()


def test_malformed_request_line_gets_a_problem_and_a_closed_connection(api: DemoAPI) -> None:
    reply = raw_exchange(api, b"NONSENSE\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert b"application/problem+json" in reply


def test_chunked_request_body_is_refused_with_411(api: DemoAPI) -> None:
    reply = raw_exchange(
        api,
        b"POST /charges HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    )
    assert reply.startswith(b"HTTP/1.1 411 ")
    assert api.requests[0].outcome == "rejected"


# -- lifecycle -------------------------------------------------------------------------


def demo_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("woml-demo")]


def test_stop_closes_idle_keep_alive_and_delayed_connections_and_joins_threads() -> None:
    api = DemoAPI().start()
    url = api.url
    idle = httpx.Client(base_url=url, timeout=10, trust_env=False)
    slow = httpx.Client(base_url=url, timeout=10, trust_env=False)
    failures: list[BaseException] = []

    def held() -> None:
        try:
            slow.get("/charges")
        except httpx.HTTPError as error:
            failures.append(error)

    try:
        idle.get("/charges")  # leaves an idle keep-alive connection open
        api.delay_next(1, 60.0)
        waiter = threading.Thread(target=held)
        waiter.start()
        wait_until(lambda: len(api.requests) == 2)
        assert demo_threads()
        api.stop()
        waiter.join()
        assert demo_threads() == []
        assert not api.running
        with pytest.raises(httpx.ConnectError):
            idle.get("/charges", headers={"Connection": "close"})
    finally:
        idle.close()
        slow.close()
        api.stop()  # a second stop is harmless


def test_start_twice_is_refused_and_restart_after_stop_works() -> None:
    api = DemoAPI()
    with api, pytest.raises(DemoAPIError, match="already running"):
        api.start()
    with pytest.raises(DemoAPIError, match="not running"):
        _ = api.url
    with api, httpx.Client(trust_env=False) as client:
        assert client.get(f"{api.url}/charges").status_code == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "localhost", "::1", "192.168.1.10"])
def test_only_127_0_0_1_is_allowed_as_host(host: str) -> None:
    with pytest.raises(DemoAPIError, match=r"127\.0\.0\.1"):
        DemoAPI(host=host)


def test_demo_api_error_is_a_woml_error() -> None:
    with pytest.raises(WomlError):
        DemoAPI(ttl=0)


def test_server_listens_on_loopback_only(api: DemoAPI) -> None:
    assert api.url.startswith("http://127.0.0.1:")


# -- command line ------------------------------------------------------------------------


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_command_line_serves_until_signalled(stop_signal: signal.Signals) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "woml_magic.demo", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", banner)
        assert match, banner
        with httpx.Client(trust_env=False, timeout=10) as client:
            assert client.get(f"{match.group(0)}/charges").json() == {"data": []}
        process.send_signal(stop_signal)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "GET /charges -> 200 executed" in out
    assert "stopped" in out


def test_command_line_refuses_a_bad_port() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "woml_magic.demo", "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "70000" in result.stderr
