"""Validating the script's request object, redaction and the host allow-list (spec §4.1).

Pure: nothing here opens a socket. Sending is covered in test_services_http.py.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from woml_magic.errors import ServiceRejection
from woml_magic.services import (
    DEFAULT_REDACTED,
    HostAllowList,
    parse_request,
    redact_headers,
)

URL = "https://api.example.com/customers"


def rejection(request: Any, options: Any = None) -> ServiceRejection:
    with pytest.raises(ServiceRejection) as info:
        parse_request(request, options)
    return info.value


def test_defaults_are_get_30s_no_body_no_name() -> None:
    req = parse_request({"url": URL}, None)
    assert (req.method, str(req.url), req.headers, req.content, req.timeout, req.name) == (
        "GET",
        URL,
        (),
        None,
        30.0,
        None,
    )


def test_method_is_uppercased() -> None:
    assert parse_request({"url": URL, "method": "patch"}, None).method == "PATCH"


def test_json_is_serialised_with_content_type_unless_the_script_set_one() -> None:
    req = parse_request({"url": URL, "method": "POST", "json": {"a": [1, "é"]}}, None)
    assert json.loads(req.content or b"") == {"a": [1, "é"]}
    assert ("Content-Type", "application/json") in req.headers
    own = parse_request(
        {"url": URL, "json": 1, "headers": {"content-type": "application/merge-patch+json"}},
        None,
    )
    assert own.headers == (("content-type", "application/merge-patch+json"),)


def test_json_null_is_sent_as_null() -> None:
    assert parse_request({"url": URL, "json": None}, None).content == b"null"


def test_body_string_is_sent_as_utf8() -> None:
    assert parse_request({"url": URL, "body": "a=1&b=é"}, None).content == "a=1&b=é".encode()


def test_query_values_read_like_javascript_string_conversion_and_merge_with_the_url() -> None:
    req = parse_request(
        {
            "url": URL + "?page=1&keep=yes",
            "query": {"page": 2, "ratio": 1.5, "whole": 3.0, "on": True, "tag": ["a", "b"]},
        },
        None,
    )
    assert req.url.params.multi_items() == [
        ("page", "2"),
        ("keep", "yes"),
        ("ratio", "1.5"),
        ("whole", "3"),
        ("on", "true"),
        ("tag", "a"),
        ("tag", "b"),
    ]


@pytest.mark.parametrize(
    ("timeout", "seconds"),
    [("5s", 5.0), ("250ms", 0.25), ("1m30s", 90.0), (1500, 1.5), (0.5, 0.0005)],
)
def test_timeout_is_a_duration_string_or_milliseconds(timeout: Any, seconds: float) -> None:
    assert parse_request({"url": URL, "timeout": timeout}, None).timeout == seconds


def test_idempotency_sends_exactly_its_header_and_value() -> None:
    req = parse_request(
        {"url": URL, "idempotency": {"header": "Idempotency-Key", "value": "k-1"}}, None
    )
    assert req.headers == (("Idempotency-Key", "k-1"),)
    assert req.idempotency == ("Idempotency-Key", "k-1")


def test_name_comes_from_options() -> None:
    assert parse_request({"url": URL}, {"name": "create-customer"}).name == "create-customer"


@pytest.mark.parametrize(
    ("request_", "options", "says"),
    [
        ("https://x", None, "expects an object"),
        ({}, None, "request.url is required"),
        ({"url": "/customers"}, None, "absolute http:// or https://"),
        ({"url": "ftp://example.com/x"}, None, "absolute http:// or https://"),
        ({"url": URL, "method": "FETCH"}, None, "GET, HEAD, POST"),
        ({"url": URL, "method": 1}, None, "not allowed"),
        ({"url": URL, "headers": []}, None, "request.headers must be an object"),
        ({"url": URL, "headers": {"X-N": 1}}, None, "header values must be strings"),
        ({"url": URL, "headers": {"X-A": "a\r\nX-B: b"}}, None, "line break"),
        ({"url": URL, "headers": {"bad name": "v"}}, None, "invalid header name"),
        ({"url": URL, "headers": {"X-Name": "café"}}, None, "non-ASCII"),
        ({"url": URL, "headers": {"Content-Length": "5"}}, None, "set by the HTTP client"),
        ({"url": URL, "headers": {"X-A": "1", "x-a": "2"}}, None, "case-insensitive"),
        ({"url": URL, "query": "a=1"}, None, "request.query must be an object"),
        ({"url": URL, "query": {"a": None}}, None, "request.query.a is null"),
        ({"url": URL, "query": {"a": {"b": 1}}}, None, "request.query.a is object"),
        ({"url": URL, "json": {}, "body": "x"}, None, "not both"),
        ({"url": URL, "body": {"a": 1}}, None, "body must be a string"),
        ({"url": URL, "timeout": "5"}, None, "has no unit"),
        ({"url": URL, "timeout": 0}, None, "out of range"),
        ({"url": URL, "timeout": "25h"}, None, "up to 24h"),
        ({"url": URL, "timeout": True}, None, "request.timeout is boolean"),
        ({"url": URL, "idempotency": "k"}, None, "request.idempotency must be an object"),
        ({"url": URL, "idempotency": {"header": "K"}}, None, "idempotency.value must be"),
        ({"url": URL, "idempotency": {"header": "", "value": "v"}}, None, "an empty string"),
        ({"url": URL, "idempotency": {"header": "K", "value": "v", "x": 1}}, None, "'x'"),
        (
            {"url": URL, "headers": {"k": "a"}, "idempotency": {"header": "K", "value": "v"}},
            None,
            "keep it only in request.idempotency",
        ),
        ({"url": URL}, "charge", "options must be an object"),
        ({"url": URL}, {"name": ""}, "options.name must be a non-empty string"),
        ({"url": URL}, {"name": 3}, "got number"),
    ],
)
def test_invalid_requests_reject_with_a_typeerror_that_names_the_rule(
    request_: Any, options: Any, says: str
) -> None:
    err = rejection(request_, options)
    assert err.name == "TypeError"
    assert says in err.message


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [("header", "headers"), ("params", "query"), ("data", "json"), ("methd", "method")],
)
def test_unknown_request_keys_name_the_allowed_keys_and_the_nearest(
    key: str, suggestion: str
) -> None:
    err = rejection({"url": URL, key: 1})
    assert err.name == "TypeError"
    assert f"unknown key {key!r}" in err.message
    assert "method, url, headers, query, json, body, timeout, idempotency" in err.message
    assert f"did you mean {suggestion!r}" in err.message


def test_unknown_option_key_is_named() -> None:
    err = rejection({"url": URL}, {"nmae": "x"})
    assert "unknown key 'nmae' in options" in err.message
    assert "did you mean 'name'" in err.message


def test_a_password_in_the_url_is_not_shown() -> None:
    req = parse_request({"url": "https://me:s3cret@api.example.com/x#frag"}, None)
    assert req.shown_url == "https://me:•••@api.example.com/x"
    assert "s3cret" not in req.shown_url
    assert req.url.password == "s3cret"  # still sent


def test_redaction_is_case_insensitive_and_keeps_names_and_other_values() -> None:
    headers = {"Authorization": "Bearer t", "COOKIE": "c", "X-Trace": "1", "X-Secret": "s"}
    assert redact_headers(headers, (*DEFAULT_REDACTED, "x-SECRET")) == {
        "Authorization": "•••",
        "COOKIE": "•••",
        "X-Trace": "1",
        "X-Secret": "•••",
    }


@pytest.mark.parametrize(
    ("entries", "url", "allowed"),
    [
        (None, "https://anything.example/", True),
        ([], "https://api.example.com/", False),
        (["api.example.com"], "https://API.Example.com/x", True),
        (["api.example.com"], "https://evil.example.com/x", False),
        (["*.example.com"], "https://a.b.example.com/", True),
        (["*.example.com"], "https://example.com/", False),
        (["*.example.com"], "https://notexample.com/", False),
        (["127.0.0.1:8080"], "http://127.0.0.1:8080/", True),
        (["127.0.0.1:8080"], "http://127.0.0.1:8081/", False),
        (["api.example.com:443"], "https://api.example.com/", True),
        (["::1"], "http://[::1]:9000/", True),
        (["[::1]:9000"], "http://[::1]:9000/", True),
        (["[::1]:9000"], "http://[::1]:9001/", False),
    ],
)
def test_host_allow_list_matching(entries: list[str] | None, url: str, allowed: bool) -> None:
    assert HostAllowList(entries).allows(httpx.URL(url)) is allowed
