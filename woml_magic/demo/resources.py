"""The demo API's two collections, customers and charges, and their validation (spec §8).

``POST /customers`` takes ``{email, name?}``; ``POST /charges`` takes
``{amount, currency, customer?}``. A body that breaks a rule is answered ``400`` with
a problem naming the field, the bad value and what is allowed. Records get ids
``cus_0001``, ``ch_0001``, … in creation order and a ``created`` UTC timestamp.
"""

from __future__ import annotations

import re
import time
from typing import Any

from .problems import ProblemError, fail

#: Stripe's own upper bound for an amount in the smallest currency unit.
MAX_AMOUNT = 99_999_999

CURRENCY = re.compile(r"[A-Za-z]{3}")

#: collection name → (id prefix, allowed fields, required fields)
COLLECTIONS: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {
    "customers": ("cus", frozenset({"email", "name"}), frozenset({"email"})),
    "charges": (
        "ch",
        frozenset({"amount", "currency", "customer"}),
        frozenset({"amount", "currency"}),
    ),
}


def _invalid(detail: str, field: str) -> ProblemError:
    return fail(400, detail, slug="invalid-request", title="Invalid request", field=field)


def _check_fields(collection: str, body: Any) -> dict[str, Any]:
    """``body`` as a dict with only allowed fields and every required one."""
    _, allowed, required = COLLECTIONS[collection]
    if not isinstance(body, dict):
        raise fail(
            400,
            f"the body of POST /{collection} must be a JSON object, not "
            f"{type(body).__name__ if body is not None else 'null'}.",
            slug="invalid-request",
            title="Invalid request",
        )
    for name in body:
        if name not in allowed:
            raise _invalid(
                f"unknown field {name!r} for POST /{collection}; allowed fields are "
                f"{', '.join(sorted(allowed))}.",
                name,
            )
    for name in sorted(required):
        if name not in body:
            raise _invalid(f"field {name!r} is required for POST /{collection}.", name)
    return body


def validate_customer(body: Any) -> dict[str, Any]:
    """The fields of a new customer: ``email`` a string with an ``@``, ``name`` optional."""
    fields = _check_fields("customers", body)
    email = fields["email"]
    if not isinstance(email, str) or "@" not in email.strip("@"):
        raise _invalid(f"email {email!r} must be a string like 'ada@example.com'.", "email")
    name = fields.get("name")
    if name is not None and not isinstance(name, str):
        raise _invalid(f"name {name!r} must be a string or null.", "name")
    return {"email": email, "name": name}


def validate_charge(body: Any, customers: list[dict[str, Any]]) -> dict[str, Any]:
    """The fields of a new charge.

    ``amount``: an integer from 1 to 99,999,999 (smallest currency unit, as Stripe);
    ``currency``: three letters, stored lower-case; ``customer``: optional id of an
    existing customer.
    """
    fields = _check_fields("charges", body)
    amount = fields["amount"]
    if isinstance(amount, bool) or not isinstance(amount, int) or not 1 <= amount <= MAX_AMOUNT:
        raise _invalid(
            f"amount {amount!r} must be an integer from 1 to {MAX_AMOUNT} "
            "(in the currency's smallest unit, e.g. cents).",
            "amount",
        )
    currency = fields["currency"]
    if not isinstance(currency, str) or not CURRENCY.fullmatch(currency):
        raise _invalid(
            f"currency {currency!r} must be a three-letter ISO 4217 code such as 'usd'.",
            "currency",
        )
    customer = fields.get("customer")
    if customer is not None:
        if not isinstance(customer, str):
            raise _invalid(f"customer {customer!r} must be a customer id string.", "customer")
        if not any(record["id"] == customer for record in customers):
            raise _invalid(
                f"customer {customer!r} does not exist; create it with POST /customers "
                "first, or omit the field.",
                "customer",
            )
    return {"amount": amount, "currency": currency.lower(), "customer": customer}


def new_record(collection: str, number: int, fields: dict[str, Any]) -> dict[str, Any]:
    """A record with its id (``cus_0001``), ``object`` and ``created`` (UTC, ISO 8601)."""
    prefix = COLLECTIONS[collection][0]
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "id": f"{prefix}_{number:04d}",
        "object": collection[:-1],
        **fields,
        "created": created,
    }
