"""Form bodies: ``services.http.request({form})`` (spec §10.3's last sentence).

``form`` is an object sent as ``application/x-www-form-urlencoded``, nested keys
flattened as payment APIs take them: ``a[b]=c`` for objects, ``a[0]=x`` for arrays.
A real loopback server parses what arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, parse_qsl

import pytest
from loopback import Answer, Loopback

import woml_magic as wm
from woml_magic.errors import ServiceRejection
from woml_magic.events import Event
from woml_magic.services import CallScope, HttpService, Secrets, StepCalls
from woml_magic.services.http_request import form_pairs, parse_request
from woml_magic.services.secrets import reference


class FormServer(Loopback):
    """Records each request's headers and raw body; answers the parsed form as JSON."""

    def __init__(self) -> None:
        super().__init__(self._answer)

    @staticmethod
    def _answer(request: dict[str, Any]) -> Answer:
        payload = json.dumps(parse_qsl(request["body"], keep_blank_values=True)).encode()
        return 200, {"Content-Type": "application/json"}, payload


@pytest.fixture
def server() -> Iterator[FormServer]:
    made = FormServer()
    yield made
    made.close()


def send(form_request: dict[str, Any], secrets: Secrets | None = None) -> Any:
    """One call through the real ``HttpService``; its value or its rejection."""

    async def main() -> Any:
        service = HttpService(secrets=secrets)
        events: list[Event] = []
        scope = CallScope(run_id="r", step_id="s", attempt_number=1, step_calls=StepCalls(),
                          emit=events.append, now=lambda: 0.0, busy=contextlib.nullcontext)
        try:
            return await service.request(form_request, None, scope)
        except ServiceRejection as rejection:
            return rejection
        finally:
            await service.aclose()

    return asyncio.run(main())


# --- the encoding -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("form", "pairs"),
    [
        ({"amount": 2500, "currency": "eur"}, [("amount", "2500"), ("currency", "eur")]),
        ({"metadata": {"order": 7}}, [("metadata[order]", "7")]),
        ({"metadata": {"order": {"line": "x"}}}, [("metadata[order][line]", "x")]),
        ({"expand": ["customer", "invoice"]}, [("expand[0]", "customer"),
                                               ("expand[1]", "invoice")]),
        ({"items": [{"price": "p_1", "quantity": 2}, {"price": "p_2"}]},
         [("items[0][price]", "p_1"), ("items[0][quantity]", "2"), ("items[1][price]", "p_2")]),
        ({"capture": True, "livemode": False}, [("capture", "true"), ("livemode", "false")]),
        ({"amount": 1.5, "whole": 2.0}, [("amount", "1.5"), ("whole", "2")]),
        ({"description": None, "kept": "x"}, [("kept", "x")]),  # null: left out
        ({"description": ""}, [("description", "")]),  # "": an empty value
        ({"metadata": {}, "expand": []}, []),  # empty: nothing sent
        ({"nested": [[1, 2], [3]]}, [("nested[0][0]", "1"), ("nested[0][1]", "2"),
                                     ("nested[1][0]", "3")]),
    ],
)
def test_form_keys_flatten_as_payment_apis_take_them(
    form: dict[str, Any], pairs: list[tuple[str, str]]
) -> None:
    assert form_pairs(form) == pairs


def test_the_body_is_standard_urlencoding_with_the_form_content_type() -> None:
    req = parse_request({"method": "POST", "url": "http://127.0.0.1:1/x",
                         "form": {"metadata": {"note": "a&b=c d/ü"}, "n": 1}}, None)
    assert req.content == b"metadata%5Bnote%5D=a%26b%3Dc+d%2F%C3%BC&n=1"
    assert ("Content-Type", "application/x-www-form-urlencoded") in req.headers


def test_a_content_type_the_script_set_is_kept() -> None:
    req = parse_request({"method": "POST", "url": "http://127.0.0.1:1/x",
                         "headers": {"content-type": "application/x-www-form-urlencoded; "
                                                     "charset=utf-8"},
                         "form": {"a": "b"}}, None)
    types = [v for k, v in req.headers if k.lower() == "content-type"]
    assert types == ["application/x-www-form-urlencoded; charset=utf-8"]


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        ({"form": {"a": 1}, "json": {"a": 1}}, "request has both json and form"),
        ({"form": {"a": 1}, "body": "a=1"}, "request has both form and body"),
        ({"form": "a=1"}, "request.form must be an object"),
        ({"form": [["a", 1]]}, "request.form must be an object"),
    ],
)
def test_form_misuse_is_a_type_error_saying_what_is_allowed(
    request_: dict[str, Any], says: str
) -> None:
    with pytest.raises(ServiceRejection) as info:
        parse_request({"method": "POST", "url": "http://127.0.0.1:1/x", **request_}, None)
    assert info.value.name == "TypeError"
    assert says in info.value.message
    if "both" in says:
        assert "not both" in info.value.message


def test_form_is_a_known_request_key_and_formdata_points_to_it() -> None:
    with pytest.raises(ServiceRejection) as info:
        parse_request({"url": "http://127.0.0.1:1/x", "formData": {"a": 1}}, None)
    assert "did you mean 'form'?" in info.value.message


# --- on the wire --------------------------------------------------------------------------


def test_the_server_parses_what_was_sent(server: FormServer) -> None:
    result = send({"method": "POST", "url": server.url + "/charges", "form": {
        "amount": 2500, "currency": "eur", "capture": False, "description": None,
        "metadata": {"order": 7, "note": "a&b=c d"},
        "items": [{"price": "p_1", "quantity": 2}], "expand": ["customer"],
    }})
    sent = server.requests[0]
    assert sent["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qs(sent["body"]) == {
        "amount": ["2500"], "currency": ["eur"], "capture": ["false"],
        "metadata[order]": ["7"], "metadata[note]": ["a&b=c d"],
        "items[0][price]": ["p_1"], "items[0][quantity]": ["2"], "expand[0]": ["customer"],
    }
    assert result["status"] == 200


def test_secrets_are_substituted_inside_form_values(server: FormServer) -> None:
    store = Secrets({"CARD": "tok_visa_4242"})
    result = send({"method": "POST", "url": server.url + "/charges",
                   "form": {"source": reference("CARD"), "metadata": {"k": reference("CARD")}}},
                  store)
    assert parse_qs(server.requests[0]["body"]) == {"source": ["tok_visa_4242"],
                                                    "metadata[k]": ["tok_visa_4242"]}
    # The server's echo comes back with the reference.
    assert result["data"] == [["source", reference("CARD")], ["metadata[k]", reference("CARD")]]


def test_a_script_sends_a_form_through_the_engine(server: FormServer) -> None:
    run = wm.run(f"""<step id="s" retry="1"><script>
const r = await services.http.request({{method: "POST", url: "{server.url}/c",
  form: {{amount: 2500, metadata: {{order: 7}}, expand: ["a", "b"], ok: true, gone: null}}}},
  {{name: "create"}});
return r.data;
</script></step>""", clock="simulated")
    assert run.steps["s"].result == [["amount", "2500"], ["metadata[order]", "7"],
                                     ["expand[0]", "a"], ["expand[1]", "b"], ["ok", "true"]]
