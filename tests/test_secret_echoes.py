"""Secrets in every disguise (spec §10.1): echoes in the encodings servers use.

A server writes back what it got in the encoding of the place it writes it to: an
HTML error page escapes it, a redirect percent-encodes it, httpbin's ``/headers``
echoes the ``Authorization: Basic`` token built from a URL's userinfo, an error
shouts it in capitals. Each of those is scrubbed before anything keeps it; a JSON body
built with ``JSON.stringify`` stays valid JSON whatever the value holds; ``btoa`` of a
reference says how to send Basic auth. The end-to-end tests use a real loopback
server and search every byte the product made with ``test_secrets``'s helpers.
"""

from __future__ import annotations

import base64
import html
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, quote_plus, urlsplit

import pytest
from loopback import Answer, Loopback
from test_secrets import assert_nowhere, assert_run_holds_none, call

import woml_magic as wm
from woml_magic.errors import ServiceRejection
from woml_magic.events import CallStarted
from woml_magic.services import Secrets
from woml_magic.services.secrets import reference

#: Every character an encoder changes: HTML's five, JSON's two, the four that
#: encodeURIComponent leaves (!*'() , with ~), a space, a slash, a non-ASCII letter.
PW = "p&ss wörd<9>\"x'\\!*()~/"
REF = reference("PW")
USER = "alice"


def encode_uri_component(text: str) -> str:
    """JavaScript's ``encodeURIComponent``: leaves ``A-Za-z0-9-_.!~*'()``."""
    return quote(text, safe="-_.!~*'()")


def every_char(template: str) -> Callable[[str], str]:
    return lambda text: "".join(template.format(ord(c)) for c in text)


def b64(text: str, alphabet: str = "standard", padded: bool = True) -> str:
    encoded = base64.b64encode(text.encode())
    if alphabet == "url-safe":
        encoded = base64.urlsafe_b64encode(text.encode())
    out = encoded.decode()
    return out if padded else out.rstrip("=")


def go_json(text: str) -> str:
    """Go's encoding/json: HTML-safe, < > & written as \\u003c \\u003e \\u0026."""
    return (
        json.dumps(text, ensure_ascii=False)[1:-1]
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )


#: (name, encoder): how an echo writes the value. Every one is scrubbed whole.
ENCODINGS: list[tuple[str, Callable[[str], str]]] = [
    ("as is", lambda t: t),
    ("upper-cased", str.upper),
    ("lower-cased", str.lower),
    ("html.escape", html.escape),
    ("HTML escapes, upper-cased", lambda t: html.escape(t).upper()),
    ("HTML decimal references", every_char("&#{};")),
    ("HTML hex references", every_char("&#x{:x};")),
    ("HTML hex references, upper", every_char("&#X{:X};")),
    (
        "HTML named references",
        lambda t: (
            t.replace("&", "&amp;")
            .replace("!", "&excl;")
            .replace("(", "&lpar;")
            .replace("'", "&apos;")
            .replace("\\", "&bsol;")
        ),
    ),
    ("encodeURIComponent", encode_uri_component),
    ("encodeURIComponent, lower hex", lambda t: encode_uri_component(t).lower()),
    ("form (+ for a space)", quote_plus),
    ("RFC 3986, every reserved character", lambda t: quote(t, safe="")),
    ("RFC 3986, lower hex", lambda t: quote(t, safe="").lower()),
    ("a path (/ kept)", quote),
    ("every byte percent-encoded", lambda t: "".join(f"%{b:02X}" for b in t.encode())),
    ("JSON", lambda t: json.dumps(t, ensure_ascii=False)[1:-1]),
    ("JSON, ASCII only", lambda t: json.dumps(t)[1:-1]),
    ("JSON, HTML-safe (Go)", go_json),
    ("JSON, every character \\uXXXX", every_char("\\u{:04x}")),
    ("JSON, every character \\uXXXX upper", every_char("\\u{:04X}")),
    ("JSON in a JSON string", lambda t: json.dumps(json.dumps(t)[1:-1])[1:-1]),
    ("Python repr", lambda t: repr(t)[1:-1]),
    ("Python ascii", lambda t: ascii(t)[1:-1]),
    ("base64", b64),
    ("base64 unpadded", lambda t: b64(t, padded=False)),
    ("base64 URL-safe", lambda t: b64(t, "url-safe")),
    ("base64 URL-safe unpadded", lambda t: b64(t, "url-safe", padded=False)),
    ("Basic auth token (user:value)", lambda t: b64(f"{USER}:{t}")),
    ("Basic auth token, URL-safe unpadded", lambda t: b64(f"{USER}:{t}", "url-safe", padded=False)),
]


def echo_forms(value: str) -> list[str]:
    """Every form of ``ENCODINGS`` (for ``assert_nowhere``), plus the bare 3-byte groups
    of the value's base64 at each offset (any base64 that carries it contains one)."""
    forms = {encode(value) for _, encode in ENCODINGS}
    data = value.encode()
    for skip in (0, 1, 2):
        chunk = data[skip:][: (len(data) - skip) // 3 * 3]
        forms |= {base64.b64encode(chunk).decode(), base64.urlsafe_b64encode(chunk).decode()}
    return sorted(forms)


# --- the table ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "encode"), ENCODINGS, ids=[n for n, _ in ENCODINGS])
def test_every_encoding_of_an_echo_is_scrubbed_whole(
    name: str, encode: Callable[[str], str]
) -> None:
    """spec §10.1: the whole encoded value becomes the reference, wherever it stands."""
    store = Secrets({"PW": PW})
    form = encode(PW)
    assert store.reveals(f"x {form} y")
    assert store.scrub(f"<p>said: {form}.</p>") == f"<p>said: {REF}.</p>"
    assert store.scrub_json({"k": [f"{form}"], form: 1}) == {"k": [REF], REF: 1}


@pytest.mark.parametrize("before", ["", "a", "ab", "abc"])
def test_base64_of_a_text_that_holds_the_value_is_replaced_at_every_offset(before: str) -> None:
    """Base64 of a longer text (a JSON document, user:value) with the value at each byte
    offset modulo 3: the whole token goes, so not one group of it can be decoded."""
    store = Secrets({"PW": PW})
    for encoded in (
        b64(f'{{"u": "{before}", "password": "{PW}"}}'),
        b64(f"{before}:{PW}:tail", "url-safe", padded=False),
    ):
        assert store.scrub(f"token={encoded}&next=1") == f"token={REF}&next=1"
        # A word stuck to the front of the token: the token still goes.
        assert REF in store.scrub(f"Basic{encoded}")
        assert_nowhere(store.scrub(f"Basic{encoded}"), "the scrubbed text", [PW], echo_forms)


def test_ordinary_text_is_left_as_it_is() -> None:
    """No over-scrubbing: other values' encodings, escapes and base64 pass unchanged."""
    store = Secrets({"PW": PW})
    texts = [
        html.escape("p&ss w<9>\"x'\\!"),  # a prefix of the value, encoded
        quote(PW[:-2], safe=""),
        json.dumps({"a": '\\"', "b": "%41%42", "c": "&amp;&#38;"}),
        b64(PW[:-3]),  # the base64 of most of the value is not the value
        b64("alice:another password"),
        "PW".join(["⟦", "⟧"]),
    ]
    for text in texts:
        assert store.scrub(text) == text
        assert not store.reveals(text)


def test_a_finder_never_shows_its_value() -> None:
    import pickle

    store = Secrets({"PW": PW})
    store.scrub("compile the finders")
    finders = store._finders()  # the private part under test
    assert repr(finders) == f"(Finder({REF}),)"
    with pytest.raises(TypeError, match="not serialised"):
        pickle.dumps(finders[0])


# --- a server that echoes in the encodings of the places it writes to --------------------


class DisguisingServer(Loopback):
    """httpbin-like: ``/headers`` echoes the request's headers as JSON; the others echo
    the ``pass`` query parameter the way their place writes it; ``/first-auth`` tells
    the first request's ``Authorization`` (an echo in another call's answer)."""

    def __init__(self) -> None:
        super().__init__(self._echo)

    def _echo(self, request: dict[str, Any]) -> Answer:
        parts = urlsplit(request["path"])
        path, value = parts.path, parse_qs(parts.query).get("pass", [""])[0]
        if path == "/headers":
            return (
                200,
                {"Content-Type": "application/json"},
                json.dumps({"headers": request["headers"]}).encode(),
            )
        if path == "/html":
            page = f"<html><body><p>Wrong password: {html.escape(value)}</p></body></html>"
            return 403, {"Content-Type": "text/html; charset=utf-8"}, page.encode()
        if path == "/redirect":
            return 302, {"Location": "/login?next=" + encode_uri_component(value)}, b""
        if path == "/upper":
            return 401, {"Content-Type": "text/plain"}, f"BAD PASSWORD {value.upper()}".encode()
        if path == "/b64":
            return (
                200,
                {"Content-Type": "application/json"},
                json.dumps(
                    {"token": b64(value), "url_safe": b64(value, "url-safe", padded=False)}
                ).encode(),
            )
        if path == "/json":
            got = json.loads(request["body"])  # a body that is not JSON fails the test here
            return 200, {"Content-Type": "application/json"}, json.dumps({"got": got}).encode()
        if path == "/first-auth":
            previous = self.requests[0]["headers"].get("Authorization", "")
            return 200, {"Content-Type": "text/plain"}, f"first: {previous}".encode()
        return 404, {}, b""


@pytest.fixture
def echo() -> Iterator[DisguisingServer]:
    server = DisguisingServer()
    yield server
    server.close()


def disguises_workflow(url: str) -> str:
    host = url.removeprefix("http://")
    return f"""<workflow id="disguises">
<step id="echoes" retry="1"><script>
const pw = services.secret("PW");
const seen = {{}};
const pass = "?pass=" + encodeURIComponent(pw);
const r = await services.http.request({{url: "http://{USER}:" + pw + "@{host}/headers"}},
  {{name: "basic"}});
seen.headers = r.data.headers;
for (const path of ["/html", "/upper"]) {{
  try {{
    await services.http.request({{url: "{url}" + path + pass}});
  }} catch (e) {{
    console.log(e.name, e.message, JSON.stringify(e.data));
    seen[path] = e.data;
  }}
}}
const moved = await services.http.request({{url: "{url}/redirect" + pass}});
seen.location = moved.headers.location;
seen.b64 = (await services.http.request({{url: "{url}/b64" + pass}})).data;
seen.json = (await services.http.request({{method: "POST", url: "{url}/json",
  headers: {{"Content-Type": "application/json"}},
  body: JSON.stringify({{password: pw, nested: {{again: "[" + pw + "]"}}}})}})).data;
seen.first = (await services.http.request({{url: "{url}/first-auth"}})).data;
console.log(JSON.stringify(seen));
return seen;
</script></step>
<step id="complain" retry="1"><script>
throw new Error("echoed: " + JSON.stringify(context.steps.echoes));
</script></step>
</workflow>"""


@pytest.mark.parametrize("password", [PW, "plain-Passw0rd"], ids=["every-char", "plain"])
def test_echoes_in_every_disguise_reach_nothing_but_the_script_as_references(
    echo: DisguisingServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, password: str
) -> None:
    """spec §10.1: Basic auth from userinfo, an HTML error page, a redirect's Location,
    capitals, base64 and a JSON body: the server gets the value, valid, and every echo
    is the reference in the Run, events, timelines, widget, logs and journal file."""
    journal = tmp_path / "journal.sqlite3"
    with caplog.at_level(logging.DEBUG):
        run = wm.run(
            disguises_workflow(echo.url),
            clock="simulated",
            journal=journal,
            secrets={"PW": password},
        )

    # What the server received: the value, exactly, and a valid JSON body.
    basic, *_, json_call, _first = echo.requests
    assert (
        base64.b64decode(basic["headers"]["Authorization"].removeprefix("Basic "))
        == f"{USER}:{password}".encode()
    )
    assert json.loads(json_call["body"]) == {
        "password": password,
        "nested": {"again": f"[{password}]"},
    }

    # What the script saw: references, each echo whole.
    step = run.steps["echoes"]
    assert step.status == "succeeded", step.attempts[0].error
    seen = step.result
    assert seen["headers"]["Authorization"] == f"Basic {REF}"
    assert seen["/html"] == f"<html><body><p>Wrong password: {REF}</p></body></html>"
    assert seen["/upper"] == f"BAD PASSWORD {REF}"
    assert seen["location"] == f"/login?next={REF}"
    assert seen["b64"] == {"token": REF, "url_safe": REF}
    assert seen["json"] == {"got": {"password": REF, "nested": {"again": f"[{REF}]"}}}
    assert seen["first"] == f"first: Basic {REF}"
    assert run.steps["complain"].attempts[0].error is not None

    assert_run_holds_none(run, journal, [password], echo_forms)
    records = "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request: GET" in records
    assert_nowhere(records, "the log records", [password], echo_forms)


# --- what is sent ------------------------------------------------------------------------


@pytest.mark.parametrize("password", ["p@ss:w/rd#?%", "plain-password"])
def test_a_reference_in_the_userinfo_is_sent_percent_encoded_as_basic_auth(
    echo: DisguisingServer, password: str
) -> None:
    """A password holding @ : / # ? stays the password: Basic auth carries it exactly,
    and the call is shown with the password as •••."""
    store = Secrets({"PW": password, "USER": "bob@example.com"})
    host = echo.url.removeprefix("http://")
    result, harness = call({"url": f"http://{reference('USER')}:{REF}@{host}/headers"}, store)
    assert not isinstance(result, ServiceRejection), result
    sent = echo.requests[0]
    assert urlsplit(sent["path"]).path == "/headers"
    token = sent["headers"]["Authorization"].removeprefix("Basic ")
    assert base64.b64decode(token).decode() == f"bob@example.com:{password}"
    assert result["data"]["headers"]["Authorization"] == f"Basic {reference('USER')}"
    started = harness.events[0]
    assert isinstance(started, CallStarted)
    assert started.url == f"http://{reference('USER')}:•••@{host}/headers"
    assert started.request_headers == {"Authorization": "•••"}  # what is sent is shown


def test_basic_auth_from_the_userinfo_is_a_header_the_journal_shows(echo: DisguisingServer) -> None:
    """The header is made with the request, so the call shows it (as •••), and the URL is
    sent without its userinfo; a script that also sets Authorization is told to choose."""
    host = echo.url.removeprefix("http://")
    result, harness = call({"url": f"http://me:s3cret-pw@{host}/headers"}, None)
    assert not isinstance(result, ServiceRejection), result
    assert echo.requests[0]["headers"]["Authorization"] == "Basic " + b64("me:s3cret-pw")
    started = harness.events[0]
    assert isinstance(started, CallStarted)
    assert started.request_headers == {"Authorization": "•••"}
    refused, harness = call(
        {"url": f"http://me:{REF}@{host}/", "headers": {"authorization": "Bearer t"}},
        Secrets({"PW": PW}),
    )
    assert isinstance(refused, ServiceRejection)
    assert (refused.name, refused.message) == (
        "TypeError",
        "request.url has a user and password and request.headers sets 'authorization'; "
        "give the credentials once: in the URL for Basic auth, or in the header",
    )
    assert harness.events == []
    assert len(echo.requests) == 1


@pytest.mark.parametrize("value", ['quote"d', "back\\slash", "new\nline", "ünï\u2028cödé"])
def test_a_reference_in_a_json_text_is_json_escaped(echo: DisguisingServer, value: str) -> None:
    """JSON.stringify({password: services.secret("PW")}) sends valid JSON holding the
    value, with or without a Content-Type, as the same code without secrets does."""
    store = Secrets({"PW": value})
    for headers in ({"Content-Type": "application/json"}, {}):
        body = json.dumps({"password": REF, REF: [REF]}, ensure_ascii=False)
        result, _ = call(
            {"method": "POST", "url": echo.url + "/json", "headers": headers, "body": body}, store
        )
        assert not isinstance(result, ServiceRejection), result
        assert json.loads(echo.requests[-1]["body"]) == {"password": value, value: [value]}


def test_a_json_body_that_is_not_json_as_written_is_refused_naming_why(
    echo: DisguisingServer,
) -> None:
    """Sent as JSON, but not JSON with the reference in it: where the reference stands
    cannot be known, so nothing is sent and the sentence says what to do."""
    store = Secrets({"PW": 'quote"d'})
    result, harness = call(
        {
            "method": "POST",
            "url": echo.url + "/json",
            "headers": {"Content-Type": "application/vnd.api+json"},
            "body": "{password: '" + REF + "'}",
        },
        store,
    )
    assert isinstance(result, ServiceRejection)
    assert (result.name, result.message) == (
        "TypeError",
        "request.body is sent as application/vnd.api+json but is not valid JSON as written, "
        "so a secret reference in it cannot be escaped for where it stands; build the body "
        "with JSON.stringify(...) or give the object as json",
    )
    assert harness.events == []
    assert echo.requests == []


def test_a_reference_in_a_body_that_is_not_json_is_sent_as_it_stands(
    echo: DisguisingServer,
) -> None:
    store = Secrets({"PW": 'quote"d'})
    call({"method": "POST", "url": echo.url + "/raw", "body": f"password={REF}"}, store)
    assert echo.requests[-1]["body"] == 'password=quote"d'


# --- btoa in the script -------------------------------------------------------------------


def test_btoa_of_a_reference_says_how_to_send_basic_auth() -> None:
    run = wm.run(
        """<step id="s" retry="1"><script>
const ok = btoa("alice:bob") + btoa({toString: () => "x"});
const pw = services.secret("PW");
return btoa("alice:" + pw);
</script></step>""",
        secrets={"PW": PW},
    )
    error = run.steps["s"].attempts[0].error
    assert error is not None
    assert (error.name, error.line) == ("TypeError", 4)
    assert error.message == (
        "btoa() cannot encode a secret reference (its value exists only in the kernel, "
        "when a request is sent); for HTTP Basic auth put the reference in the URL's "
        'userinfo, url: "https://alice:" + services.secret("PW") + "@api.example.com/", '
        "and the kernel sends Authorization: Basic with the value"
    )


def test_btoa_of_an_encoded_reference_is_refused_too_and_other_text_is_encoded() -> None:
    run = wm.run(
        """<step id="s" retry="1"><script>
const plain = [btoa("alice:bob"), btoa({toString: () => "x"}), btoa("")];
let refused = null;
try { btoa(encodeURIComponent(services.secret("PW"))); } catch (e) { refused = e.name; }
return {plain, refused};
</script></step>""",
        secrets={"PW": PW},
    )
    assert run.steps["s"].result == {"plain": ["YWxpY2U6Ym9i", "eA==", ""], "refused": "TypeError"}
