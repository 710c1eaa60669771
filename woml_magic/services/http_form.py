"""A script's values as URL-encoded pairs: ``request.query`` and ``request.form`` bodies
(spec §4.1, §10.3).

``query_pairs`` reads a ``query`` object (an array repeats its key); ``form_pairs``
flattens a ``form`` object as payment APIs take it (``metadata[order]=7``), and
``form_body`` is what is sent as ``FORM_TYPE``. Scalars are written as JavaScript's
``String(value)`` writes them, so the URL reads as the script's author expects; any
other value is a ``TypeError``-named ``ServiceRejection`` naming its JavaScript type
(``js_type``, which every message about a request uses).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

from ..errors import ServiceRejection

FORM_TYPE = "application/x-www-form-urlencoded"


def js_type(value: Any) -> str:
    """The JavaScript name of a parsed-JSON value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _reject(message: str) -> ServiceRejection:
    return ServiceRejection("TypeError", message)


def _query_text(key: str, value: Any) -> str:
    # Mirrors String(value) in JavaScript, so the URL reads as the script author expects.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    raise _reject(
        f"request.query.{key} is {js_type(value)}; query values are strings, numbers, "
        "booleans or arrays of them (omit a key to leave it out)"
    )


def query_pairs(value: Any) -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs of a ``query`` object (absent: none); an array value
    gives one pair per item."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise _reject(
            f'request.query must be an object like {{"page": 2, "tag": ["a", "b"]}}, '
            f"got {js_type(value)}"
        )
    pairs: list[tuple[str, str]] = []
    for key, item in value.items():
        items = item if isinstance(item, list) else [item]
        pairs.extend((key, _query_text(key, one)) for one in items)
    return pairs


def _form_text(path: str, value: Any) -> str:
    # As in a query string: JavaScript's String(value) for scalars.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        try:
            return _query_text(path, value)
        except ServiceRejection:
            pass
    raise _reject(
        f"request.form {path} is {js_type(value)}; form values are strings, numbers, "
        "booleans, null (left out), arrays or objects of them"
    )


def form_pairs(form: Any) -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs of a ``form`` object, flattened as payment APIs take
    them (spec §10.3): ``{metadata: {order: 7}}`` → ``metadata[order]=7``;
    ``{items: [{price: "p_1"}]}`` → ``items[0][price]=p_1``; ``{expand: ["a"]}`` →
    ``expand[0]=a``. Booleans are ``true``/``false``; ``null`` leaves the key out (send
    ``""`` for an empty value); an empty array or object sends nothing."""
    if not isinstance(form, dict):
        raise _reject(
            f'request.form must be an object like {{"amount": 2500, "metadata": {{"order": 7}}}}, '
            f"got {js_type(form)}"
        )
    pairs: list[tuple[str, str]] = []

    def walk(key: str, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, dict):
            for sub, item in value.items():
                walk(f"{key}[{sub}]", item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(f"{key}[{index}]", item)
        else:
            pairs.append((key, _form_text(key, value)))

    for key, value in form.items():
        walk(key, value)
    return pairs


def form_body(form: Any) -> bytes:
    """The body a ``form`` object is sent as (``FORM_TYPE``): its ``form_pairs``,
    URL-encoded."""
    return urlencode(form_pairs(form)).encode("ascii")
