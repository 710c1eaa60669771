"""Secrets: values a script may send but never see (spec §10.1).

A ``Secrets`` store maps names to values and lives in the kernel. A script gets an
opaque *reference* for a name from ``services.secret("NAME")``::

    ⟦woml-secret:NAME⟧          U+27E6, "woml-secret:", the name, U+27E7

and the HTTP service replaces every reference in a request (URL, query, headers,
form, JSON, body) by the value when it sends it, escaped for where it stands: in the
userinfo of a URL percent-encoded, in a JSON text JSON-escaped (``escape``). What is
journaled and shown keeps the reference. Whatever comes back (response headers, data,
error messages) is scrubbed first: every occurrence of a value in the encodings echoes
use (``echoes.py``: percent-encoded, HTML-escaped, JSON-escaped, base64 — of the value
or of ``user:value`` as an ``Authorization: Basic`` token carries it — in any letter
case) becomes its reference. So the value never reaches the JavaScript context, the
journal, the ``Run``, a timeline, logs or error messages.

A reference a script percent-encoded (``encodeURIComponent(services.secret("K"))``)
is found too and replaced by the value percent-encoded the same way. Other
transformations of a reference (slicing, a case change) make it an ordinary string,
sent as it stands; ``btoa`` of one is refused in the script (prelude.js) with the way
to send Basic auth: a reference in the URL's userinfo.

The store never shows a value: ``repr`` and ``str`` list names only, and it refuses
to be pickled, so it cannot travel to another process or a workflow history by
accident.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, NoReturn
from urllib.parse import quote

from ..errors import ServiceRejection, WomlRunError
from .echoes import Finder

#: ``[A-Za-z_][A-Za-z0-9_]*``: what a secret's name may be (an environment variable's
#: name), so a name reads the same in ``%woml secret NAME``, ``Woml.secrets`` and code.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: A value shorter than this would be scrubbed out of every response wherever its
#: characters happen to appear.
MIN_VALUE_CHARS: Final = 4

OPEN: Final = "\u27e6woml-secret:"
CLOSE: Final = "\u27e7"
#: A reference as the script holds it, and as ``encodeURIComponent`` leaves it.
_REFERENCE = re.compile(r"\u27e6woml-secret:([^\u27e7\s]{0,128})\u27e7")
_ENCODED_REFERENCE = re.compile(r"%E2%9F%A6woml-secret%3A([A-Za-z0-9_]{1,128})%E2%9F%A7",
                                re.IGNORECASE)
_HOW_TO_SET = "Set one with %woml secret NAME, Woml.secrets, or wm.run(..., secrets={...})"


def reference(name: str) -> str:
    """The reference ``services.secret(name)`` returns: ``⟦woml-secret:NAME⟧``."""
    return f"{OPEN}{name}{CLOSE}"


def has_reference(value: Any) -> bool:
    """Does any string in the JSON value ``value`` (keys included) hold a reference?"""
    if isinstance(value, str):
        return "woml-secret" in value and bool(
            _REFERENCE.search(value) or _ENCODED_REFERENCE.search(value))
    if isinstance(value, dict):
        return any(has_reference(k) or has_reference(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_reference(item) for item in value)
    return False


def encode_references(text: str) -> str:
    """``text`` with each reference percent-encoded as ``encodeURIComponent`` writes it;
    ``substitute`` then puts in the value percent-encoded the same way."""
    return _REFERENCE.sub(lambda match: quote(match.group(0), safe=""), text)


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of the JSON value ``value`` with ``change`` applied to every string,
    object keys included."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {change(k): map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(item, change) for item in value]
    return value


def json_escape(value: str) -> str:
    """``value`` as it stands inside a JSON string literal (without the quotes)."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


class Secrets:
    """Named secret values for runs (spec §10.1). Immutable; never shows a value.

    ``Secrets({"STRIPE": "sk_test_…"})``; ``names`` lists the names; ``with_secret``
    and ``without`` make changed copies. Raises ``WomlRunError`` for a name that is not
    ``[A-Za-z_][A-Za-z0-9_]*`` or a value that is not a string of at least 4 characters
    (the message names the secret, never its value).
    """

    __slots__ = ("__finders", "__values", "__weakref__")

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        checked: dict[str, str] = {}
        if values is not None and not isinstance(values, Mapping):
            raise WomlRunError(
                f"secrets must be a dict of name to value, such as {{'STRIPE': '…'}}, not "
                f"{type(values).__name__}"
            )
        for name, value in (values or {}).items():
            checked[check_name(name)] = _check_value(name, value)
        self.__values = dict(sorted(checked.items()))
        self.__finders: tuple[Finder, ...] | None = None  # made on first use: see _finders

    @classmethod
    def of(cls, value: Secrets | Mapping[str, str] | None) -> Secrets | None:
        """``value`` as a ``Secrets`` (a dict is checked and copied); None stays None."""
        if value is None or isinstance(value, Secrets):
            return value
        return cls(value)

    @property
    def names(self) -> tuple[str, ...]:
        """The names set, sorted."""
        return tuple(self.__values)

    def with_secret(self, name: str, value: str) -> Secrets:
        """A copy with ``name`` set to ``value``."""
        return Secrets({**self.__values, name: value})

    def without(self, name: str) -> Secrets:
        """A copy without ``name`` (unchanged when it is not set)."""
        return Secrets({k: v for k, v in self.__values.items() if k != name})

    def merged(self, other: Secrets | None) -> Secrets:
        """A copy with ``other``'s secrets added; ``other`` wins for a name in both."""
        if other is None or not other.names:
            return self
        return Secrets({**self.__values, **other.__values})

    def __contains__(self, name: object) -> bool:
        return name in self.__values

    def __iter__(self) -> Iterator[str]:
        return iter(self.__values)

    def __len__(self) -> int:
        return len(self.__values)

    def __bool__(self) -> bool:
        return bool(self.__values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secrets):
            return NotImplemented
        return self.__values == other.__values

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        return f"Secrets({', '.join(self.__values) or 'none'})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "Secrets are not serialised (pickled, copied to another process or stored): "
            "their values stay in this kernel"
        )

    def __copy__(self) -> Secrets:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> Secrets:
        return self  # immutable, and never serialised (see __reduce__)

    # -- the kernel's side: substituting and scrubbing --------------------------------

    def unknown(self, name: str, where: str) -> ServiceRejection:
        """The ``TypeError`` for a reference to a name that is not set."""
        return ServiceRejection(
            "TypeError",
            f"{where} refers to the secret {json.dumps(name)}, which is not set; "
            f"{self.listing()}. {_HOW_TO_SET}",
        )

    def listing(self) -> str:
        """``the secrets set are: A, B`` or ``no secrets are set``: names only."""
        return f"the secrets set are: {', '.join(self.names)}" if self else "no secrets are set"

    def check_references(self, value: Any, where: str) -> None:
        """Raise ``unknown`` for the first reference in ``value`` whose name is not set."""
        def check(text: str) -> str:
            for pattern in (_REFERENCE, _ENCODED_REFERENCE):
                for match in pattern.finditer(text):
                    if match.group(1) not in self.__values:
                        raise self.unknown(match.group(1), where)
            return text

        if has_reference(value):
            map_strings(value, check)

    def substitute(
        self, value: Any, where: str = "the request", escape: Callable[[str], str] | None = None
    ) -> Any:
        """A copy of the JSON value ``value`` with every reference replaced by its value
        (an ``encodeURIComponent``-ed one by the value percent-encoded the same way),
        passed through ``escape`` when given (``json_escape`` for a reference inside a
        JSON text). Raises ``unknown`` for a name that is not set. Kernel-side only: the
        result holds real values and must go nowhere but the request being sent."""
        self.check_references(value, where)

        def plain(match: re.Match[str]) -> str:
            text = self.__values[match.group(1)]
            return text if escape is None else escape(text)

        def encoded(match: re.Match[str]) -> str:
            return quote(self.__values[match.group(1)], safe="")

        def change(text: str) -> str:
            if "woml-secret" not in text:
                return text
            return _ENCODED_REFERENCE.sub(encoded, _REFERENCE.sub(plain, text))

        return map_strings(value, change)

    def placeholders(
        self, value: Any, where: str = "the request"
    ) -> tuple[Any, Callable[[str], str]]:
        """``value`` with each reference replaced by a plain token that every part of a
        request (host, path, query, header) carries unchanged, and the function that
        turns those tokens back into references. How the shown (journaled) form of a
        request is parsed without ever holding a value."""
        self.check_references(value, where)
        nonce = uuid.uuid4().hex[:12]
        tokens: dict[str, str] = {}

        def token(name: str) -> str:
            if name not in tokens:
                tokens[name] = f"womlsecret{nonce}n{len(tokens)}x"
            return tokens[name]

        def change(text: str) -> str:
            if "woml-secret" not in text:
                return text
            text = _REFERENCE.sub(lambda m: token(m.group(1)), text)
            return _ENCODED_REFERENCE.sub(lambda m: token(m.group(1)), text)

        placed = map_strings(value, change)
        back = {tok: reference(name) for name, tok in tokens.items()}

        def restore(text: str) -> str:
            for tok, ref in back.items():
                text = text.replace(tok, ref)
            return text

        return placed, restore

    def _finders(self) -> tuple[Finder, ...]:
        """One ``Finder`` per value, longest value first (so a value that contains
        another is replaced whole); compiled on first use, as a store is often made and
        never scrubs (≈ 0.3 ms per character of the values)."""
        if self.__finders is None:
            ordered = sorted(self.__values.items(), key=lambda item: -len(item[1]))
            self.__finders = tuple(Finder(value, reference(name)) for name, value in ordered)
        return self.__finders

    def scrub(self, text: str) -> str:
        """``text`` with every value, in each encoding an echo uses (``echoes.py``: as
        is in any case, percent-encoded, HTML-escaped, backslash-escaped, base64 of a
        text that holds it), replaced by its reference (spec §10.1)."""
        for finder in self._finders():
            text = finder.scrub(text)
        return text

    def scrub_json(self, value: Any) -> Any:
        """``scrub`` applied to every string of the JSON value ``value``, keys included."""
        if not self.__values:
            return value
        return map_strings(value, self.scrub)

    def scrub_rejection(self, rejection: ServiceRejection) -> ServiceRejection:
        """The rejection with its message and props scrubbed (a new one if anything
        changed)."""
        message = self.scrub(rejection.message)
        props = self.scrub_json(rejection.props)
        if message == rejection.message and props == rejection.props:
            return rejection
        return ServiceRejection(rejection.name, message, props)

    def reveals(self, text: str) -> bool:
        """Does ``text`` hold a value in any form ``scrub`` knows?"""
        return any(finder.found_in(text) for finder in self._finders())


def check_name(name: Any) -> str:
    """``name`` if it is a valid secret name, else ``WomlRunError`` saying what is."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        shown = name if isinstance(name, str) else type(name).__name__
        raise WomlRunError(
            f"{shown!r} is not a secret name; a name is a letter or _ followed by letters, "
            "digits or _ (like an environment variable: STRIPE_KEY)"
        )
    return name


def _check_value(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise WomlRunError(
            f"the secret {name} must be a string, not {type(value).__name__}"
        )
    if len(value) < MIN_VALUE_CHARS:
        raise WomlRunError(
            f"the secret {name} is shorter than {MIN_VALUE_CHARS} characters; a value that "
            "short would be scrubbed from every response wherever those characters appear"
        )
    return value


def secret_reference(args: list[Any], secrets: Secrets | None) -> str:
    """``services.secret(name)`` in the kernel (spec §10.1): the reference of a name that
    is set; the script's stub answers without asking, this is the same rule."""
    store = secrets or Secrets()
    name = args[0] if len(args) == 1 else None
    if not isinstance(name, str):
        raise ServiceRejection(
            "TypeError",
            'services.secret(name) takes the name of a secret as a string, e.g. '
            'services.secret("STRIPE")',
        )
    if name not in store:
        raise ServiceRejection(
            "TypeError",
            f"services.secret({json.dumps(name)}): no secret {json.dumps(name)}; "
            f"{store.listing()}. {_HOW_TO_SET}",
        )
    return reference(name)


# -- logs ----------------------------------------------------------------------------


class _HideSecrets(logging.Filter):
    """Scrubs secret values from httpx's and httpcore's log records (httpx logs every
    request's URL at INFO): the stores of the open services that hold secrets."""

    def __init__(self) -> None:
        super().__init__()
        self.stores: weakref.WeakSet[Secrets] = weakref.WeakSet()

    def filter(self, record: logging.LogRecord) -> bool:
        stores = list(self.stores)
        if stores:
            text = record.getMessage()
            for store in stores:
                text = store.scrub(text)
            record.msg, record.args = text, None
        return True


#: One filter for the process: logging is process-wide, so hiding values from it is
#: too. It holds only weak references to the stores of open services.
_LOG_FILTER = _HideSecrets()
_LOGGERS = ("httpx", "httpcore.connection", "httpcore.http11", "httpcore.http2",
            "httpcore.proxy")


def hide_from_logs(store: Secrets) -> None:
    """Scrub ``store``'s values from httpx's and httpcore's log records while it is
    open (spec §10.1: never in logs)."""
    if not _LOG_FILTER.stores:
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            if _LOG_FILTER not in logger.filters:
                logger.addFilter(_LOG_FILTER)
    _LOG_FILTER.stores.add(store)


def stop_hiding_from_logs(store: Secrets) -> None:
    """``store``'s service is closed: its values no longer pass through the logs."""
    _LOG_FILTER.stores.discard(store)
