"""The reference entries the editor shows: what each WOML element, attribute and script
name means, its default and an example (spec §2.1-§2.4, §3.4-§3.6, §4.1, §4.4, §10.1).

The entries are the content of ``docs/reference.md`` (attributes, elements) and of the
spec's script sections, one per name, for completion details and help (spec §6.4).
The *names* are not declared here: they come from the parser (``STEP_ATTRIBUTES`` …),
the service registry (``SERVICE_NAMES``) and the request parser (``REQUEST_KEYS``),
so a name added there without an entry here fails ``tests/test_editing_help.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from ..parse import SCRIPT_ATTRIBUTES, STEP_ATTRIBUTES, WORKFLOW_ATTRIBUTES
from ..services.registry import SERVICE_NAMES

#: Kinds of entry; completions carry them as their ``type`` (Jupyter's
#: ``_jupyter_types_experimental``).
ELEMENT, ATTRIBUTE, VALUE, OPTION = "element", "attribute", "value", "option"
PROPERTY, FUNCTION, MODULE, KEY, VARIABLE, SECRET = (
    "property", "function", "module", "key", "variable", "secret")


@dataclass(frozen=True)
class Entry:
    """One reference entry: ``name`` as the user writes it, a one-line ``summary``,
    the ``default`` (None: none to speak of), an ``example`` and the spec section."""

    name: str
    kind: str
    summary: str
    default: str | None
    example: str
    section: str
    signature: str = ""  # for functions: how they are called

    def text(self) -> str:
        """The entry as help shows it: title, summary, default, example."""
        title = self.signature or self.name
        lines = [f"{title} — {self.kind} (spec {self.section})", "", self.summary]
        if self.default is not None:
            lines.append(f"default: {self.default}")
        lines.append(f"example: {self.example}")
        return "\n".join(lines)


_ELEMENTS = {
    "workflow": ("A named workflow: its <step> children run in document order; "
                 "takes one attribute, id (required).",
                 None, '<workflow id="signup"> <step …>…</step> </workflow>', "§2.1"),
    "step": ("One step: a <script> run with the retry policy of its attributes.",
             None, '<step id="charge" retry="3"><script>…</script></step>', "§2.2"),
    "script": ("The step's JavaScript, raw text: a < b needs no escaping; one "
               "<![CDATA[ … ]]> section around it is allowed.",
               None, "<script>return await services.http.request({url});</script>", "§2.3"),
}

#: ``<step>`` attributes: docs/reference.md's table (value, default, rule, example).
_STEP = {
    "id": ("The step's id, [A-Za-z_][A-Za-z0-9_.-]{0,63}, unique within the workflow.",
           "required", 'id="createCustomer"'),
    "retry": ("The total number of attempts, 1 to 10 (not retries after the first).",
              "1", 'retry="4"'),
    "retry-backoff": ("How the wait between attempts grows: fixed or exponential "
                      "(min(retry-delay × 2^(k−1), retry-max-delay)).",
                      "fixed", 'retry-backoff="exponential"'),
    "retry-delay": ("The wait after a failed attempt (the first wait with exponential), "
                    "a duration from 0s to 24h.", "1s", 'retry-delay="250ms"'),
    "retry-max-delay": ("The cap of exponential waits, at least retry-delay and at most "
                        "24h; no effect with fixed.", "none (uncapped)",
                        'retry-max-delay="30s"'),
    "timeout": ("The time each attempt may take, more than 0 and at most 24h.",
                "30s", 'timeout="5s"'),
}
_WORKFLOW = {"id": ("The workflow's id, following the step id pattern.", "required",
                    'id="signup"')}
_SCRIPT = {"lang": ("The script's language; javascript is the only one.", "javascript",
                    'lang="javascript"')}

#: The values an attribute takes (spec §2.2, §2.4): choices, or examples of durations.
VALUES: dict[str, tuple[str, ...]] = {
    "retry": tuple(str(n) for n in range(1, 11)),
    "retry-backoff": ("fixed", "exponential"),
    "retry-delay": ("1s", "250ms", "500ms", "2s", "5s", "0s"),
    "retry-max-delay": ("10s", "30s", "1m", "5m"),
    "timeout": ("30s", "5s", "10s", "1m", "2m"),
    "lang": ("javascript",),
}
#: The units of a duration (spec §2.4), offered after a number.
DURATION_UNITS = ("ms", "s", "m", "h")
DURATION_ATTRIBUTES = ("retry-delay", "retry-max-delay", "timeout")

#: Names in a script (spec §3.4, §3.6, §4.1, §4.4, §10.1), dotted as written.
_SCRIPT_NAMES: dict[str, tuple[str, str, str | None, str, str, str]] = {
    # name: (kind, summary, default, example, section, signature)
    "attempt": (VARIABLE, "This attempt: number, maxAttempts, idempotencyKey (frozen).",
                None, "attempt.number", "§3.4", ""),
    "attempt.number": (PROPERTY, "The attempt's number, 1-based.", None,
                       'if (attempt.number < 3) throw new Error("busy");', "§3.4", ""),
    "attempt.maxAttempts": (PROPERTY, "The step's retry: the total number of attempts.",
                            None, "attempt.number === attempt.maxAttempts", "§3.4", ""),
    "attempt.idempotencyKey": (PROPERTY, "The step's idempotency key: the same for every "
                               "attempt and across resumes of the run.", None,
                               'idempotency: { header: "Idempotency-Key", value: '
                               "attempt.idempotencyKey }", "§3.5", ""),
    "context": (VARIABLE, "The run: payload, steps, run (frozen).", None,
                "context.payload", "§3.6", ""),
    "context.payload": (PROPERTY, "The run's payload (%%woml --payload EXPR).", "null",
                        "context.payload.amount", "§3.6", ""),
    "context.steps": (PROPERTY, "The results of the steps already succeeded in this run, "
                      "by step id.", None, "context.steps.createCustomer.id", "§3.6", ""),
    "context.run": (PROPERTY, "The run's id and its workflow's id.", None,
                    "context.run.id", "§3.6", ""),
    "context.run.id": (PROPERTY, "The run's id (%%woml --run-id ID pins it).", None,
                       "context.run.id", "§3.6", ""),
    "context.run.workflow": (PROPERTY, "The workflow's id (cell for top-level steps).", None,
                             "context.run.workflow", "§3.6", ""),
    "services": (VARIABLE, "What a script may do outside itself: "
                 + ", ".join(sorted({n.split(".")[0] for n in SERVICE_NAMES})) + ".", None,
                 'await services.sleep("1s")', "§4", ""),
    "services.http": (MODULE, "HTTP calls, performed by the kernel: request(request, options).",
                      None, "services.http.request({ url })", "§4.1", ""),
    "services.http.request": (FUNCTION, "Send an HTTP request; resolves to {status, headers, "
                              "data, replayed}, rejects with HttpError, NetworkError or "
                              "AmbiguousError.", None,
                              'await services.http.request({ method: "POST", url, json }, '
                              '{ name: "create-charge" })', "§4.1",
                              "services.http.request(request, options)"),
    "services.sleep": (FUNCTION, "Wait on the run's clock (a duration string or "
                       "milliseconds).", None, 'await services.sleep("2s")', "§4.4",
                       "services.sleep(duration)"),
    "services.secret": (FUNCTION, "An opaque reference to a secret set in the kernel; the "
                        "kernel puts the value in where a request holds it.", None,
                        'headers: { Authorization: `Bearer ${services.secret("API_KEY")}` }',
                        "§10.1", "services.secret(name)"),
    "console": (VARIABLE, "Output captured per attempt, shown in the timeline.", None,
                'console.log("sent", res.status)', "§4.4", ""),
    "console.log": (FUNCTION, "Log a line of this attempt.", None, 'console.log("x", x)',
                    "§4.4", "console.log(...values)"),
    "console.info": (FUNCTION, "Log a line at info level.", None, 'console.info("x")',
                     "§4.4", "console.info(...values)"),
    "console.warn": (FUNCTION, "Log a line at warning level.", None, 'console.warn("x")',
                     "§4.4", "console.warn(...values)"),
    "console.error": (FUNCTION, "Log a line at error level.", None, 'console.error("x")',
                      "§4.4", "console.error(...values)"),
    "console.debug": (FUNCTION, "Log a line (as console.log).", None, 'console.debug("x")',
                      "§4.4", "console.debug(...values)"),
}

#: The keys of ``services.http.request``'s two arguments (spec §4.1, §10.3), by name.
_REQUEST_KEYS = {
    "method": ("The HTTP method.", "GET", 'method: "POST"'),
    "url": ("The absolute http or https URL.", None, 'url: "https://api.example.com/charges"'),
    "headers": ("Request headers, names to strings.", None,
                'headers: { Accept: "application/json" }'),
    "query": ("Query parameters, added to the URL.", None, "query: { page: 2 }"),
    "json": ("A JSON body (sets Content-Type).", None, "json: { amount: 2500 }"),
    "body": ("A string body.", None, 'body: "a=1"'),
    "timeout": ("Each phase's timeout: a duration string or milliseconds.", "30s",
                'timeout: "5s"'),
    "idempotency": ("The key to send: {header, value}; with it a lost response retries "
                    "instead of failing closed (spec §4.2).", None,
                    'idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey }'),
    "form": ("A URL-encoded form body; nested keys as a[b]=c.", None,
             "form: { amount: 2500 }"),
}
_OPTION_KEYS = {
    "name": ("The name of a managed call, unique within one attempt: its 2xx response is "
             "journaled and reattached, not sent again (spec §4.3).", None,
             '{ name: "create-charge" }'),
}
_IDEMPOTENCY_KEYS = {
    "header": ("The header that carries the key.", None, 'header: "Idempotency-Key"'),
    "value": ("The key: the same for every attempt of the step.", None,
              "value: attempt.idempotencyKey"),
}


def _table(names: tuple[str, ...], described: Mapping[str, tuple[str, str | None, str]],
           kind: str, section: str, prefix: str = "") -> dict[str, Entry]:
    return {name: Entry(prefix + name, kind, *described[name], section=section)
            for name in names if name in described}


@cache
def attributes(element: str) -> dict[str, Entry]:
    """The attributes of ``element``, in the parser's order (spec §2.1-§2.3)."""
    if element == "step":
        return _table(STEP_ATTRIBUTES, _STEP, ATTRIBUTE, "§2.2")
    if element == "workflow":
        return _table(WORKFLOW_ATTRIBUTES, _WORKFLOW, ATTRIBUTE, "§2.1")
    if element == "script":
        return _table(SCRIPT_ATTRIBUTES, _SCRIPT, ATTRIBUTE, "§2.3")
    return {}


def undescribed() -> list[str]:
    """Names the parser, the registry or the request parser knows with no entry here."""
    from ..services.http_request import OPTION_KEYS, REQUEST_KEYS

    missing = [f"<step {n}>" for n in STEP_ATTRIBUTES if n not in _STEP]
    missing += [f"<workflow {n}>" for n in WORKFLOW_ATTRIBUTES if n not in _WORKFLOW]
    missing += [f"<script {n}>" for n in SCRIPT_ATTRIBUTES if n not in _SCRIPT]
    missing += [f"services.{n}" for n in SERVICE_NAMES if f"services.{n}" not in _SCRIPT_NAMES]
    missing += [f"request.{k}" for k in REQUEST_KEYS if k not in _REQUEST_KEYS]
    missing += [f"options.{k}" for k in OPTION_KEYS if k not in _OPTION_KEYS]
    return missing


def element(name: str) -> Entry | None:
    """The entry of a WOML element (spec §2.1-§2.3)."""
    found = _ELEMENTS.get(name)
    return None if found is None else Entry(f"<{name}>", ELEMENT, *found)


def script_name(dotted: str) -> Entry | None:
    """The entry of a name a script reads: ``attempt.number``, ``services.sleep`` …"""
    found = _SCRIPT_NAMES.get(dotted)
    if found is None:
        return None
    kind, summary, default, example, section, signature = found
    return Entry(dotted, kind, summary, default, example, section, signature)


def members(dotted: str) -> list[Entry]:
    """The members of ``attempt``, ``context``, ``services`` … in declaration order;
    ``services``' are the registry's names (spec §4)."""
    if dotted == "services" or dotted.startswith("services."):
        depth = dotted.count(".") + 1
        names = dict.fromkeys(
            ".".join(["services", *n.split(".")[:depth]]) for n in SERVICE_NAMES
            if f"services.{n}".startswith(dotted + "."))
    else:
        names = dict.fromkeys(n for n in _SCRIPT_NAMES
                              if n.startswith(dotted + ".") and "." not in n[len(dotted) + 1:])
    return [e for n in names if (e := script_name(n)) is not None]


def globals_() -> list[Entry]:
    """The names in a script's scope (spec §4): ``context``, ``attempt``, ``services``,
    ``console``."""
    return [e for n in _SCRIPT_NAMES if "." not in n and (e := script_name(n)) is not None]


@cache
def request_keys(role: str) -> dict[str, Entry]:
    """The keys of a ``services.http.request`` object: ``request``, ``options`` or
    ``idempotency`` (spec §4.1), in the request parser's order."""
    from ..services.http_request import OPTION_KEYS, REQUEST_KEYS  # httpx: on first use

    if role == "request":
        return _table(REQUEST_KEYS, _REQUEST_KEYS, KEY, "§4.1", "request.")
    if role == "options":
        return _table(OPTION_KEYS, _OPTION_KEYS, KEY, "§4.3", "options.")
    if role == "idempotency":
        return _table(("header", "value"), _IDEMPOTENCY_KEYS, KEY, "§4.1", "idempotency.")
    return {}


def methods() -> tuple[str, ...]:
    """The HTTP methods a request may use (spec §4.1)."""
    from ..services.http_request import METHODS

    return METHODS
