"""Parse a WOML cell into a ``Workflow`` (spec §2.1-§2.5, the parse half of §7).

Parsing runs in three passes over one coordinate system. Passes 1 and 2 live in
``woml_magic.scan``: the markup is scanned into tags with every ``<script>`` body taken
verbatim (scripts are raw text, spec §2.3), and lxml checks the rest is well-formed
XML. Pass 3, here, checks elements and attributes against spec §2.1-§2.4 and builds
the frozen models.

Every error is a ``WomlSyntaxError`` with a 1-based line and column in the cell.
"""

from __future__ import annotations

import re
from datetime import timedelta
from functools import lru_cache

from .errors import WomlSyntaxError
from .limits import DEFAULT_TIMEOUT_S
from .model import Step, Workflow
from .policy import MAX_DURATION, DurationError, RetryPolicy, format_duration, parse_duration
from .scan import (
    ID,
    MAX_BYTES,
    MAX_STEPS,
    NON_SPACE,
    START_TAG,
    Locator,
    Scan,
    Tag,
    check_size_and_characters,
    check_well_formed,
    scan_markup,
)
from .scan_messages import describe, quoted, retry_tag_message

__all__ = ["IMPLICIT_WORKFLOW_ID", "MAX_BYTES", "MAX_STEPS", "SCRIPT_ATTRIBUTES",
           "STEP_ATTRIBUTES", "WORKFLOW_ATTRIBUTES", "parse"]

#: spec §2.1: the id of a workflow written as top-level steps.
IMPLICIT_WORKFLOW_ID = "cell"

STEP_ATTRIBUTES = ("id", "retry", "retry-backoff", "retry-delay", "retry-max-delay", "timeout")
WORKFLOW_ATTRIBUTES = ("id",)
SCRIPT_ATTRIBUTES = ("lang",)

_RETRY = re.compile(r"[1-9][0-9]?")
_DEFAULT_TIMEOUT = timedelta(seconds=DEFAULT_TIMEOUT_S)
# Documents repeat the same few durations; timedelta is immutable, errors are not cached.
_parse_duration = lru_cache(maxsize=256)(parse_duration)


def parse(
    text: str, *, line_offset: int = 0, default_timeout: timedelta | None = None
) -> Workflow:
    """Parse one WOML cell into a frozen ``Workflow`` (spec §2, §7).

    ``default_timeout`` replaces the 30s default for steps without a ``timeout``
    attribute (the magic's ``Woml.default_timeout`` setting, spec §6.1).

    ``line_offset`` is added to every reported line and to ``Step.line`` and
    ``Step.script_line``: the magic passes 1 so that lines count the ``%%woml`` line,
    as the notebook editor shows them (spec §2.3). Raises ``WomlSyntaxError`` for every
    malformed document, with the line and column of the fault (spec §2.5).
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() takes the document as str, got {type(text).__name__}")
    if line_offset < 0:
        raise ValueError(f"line_offset must be 0 or more, got {line_offset}")
    loc = Locator(text, line_offset)
    check_size_and_characters(text, loc)
    scan = scan_markup(text, loc)
    check_well_formed(scan.blanked, loc)
    if default_timeout is not None and not timedelta(0) < default_timeout <= MAX_DURATION:
        raise ValueError(f"default_timeout must be longer than 0 and at most 24h, "
                         f"got {default_timeout}")
    return _validate(text, scan, loc, default_timeout or _DEFAULT_TIMEOUT)




def _validate(text: str, scan: Scan, loc: Locator, default_timeout: timedelta) -> Workflow:
    """Pass 3: spec §2.1 cell forms, §2.2 attributes, §2.3 children."""
    tags = scan.tags
    top = [i for i, t in enumerate(tags) if t.parent < 0]
    if not top:
        first = NON_SPACE.search(text)
        raise loc.error(
            0 if first is None else first.start(),
            'the cell has no <step>; write <step id="…"><script>…</script></step> '
            'or a <workflow id="…"> holding steps',
        )
    head = tags[top[0]]
    if head.name == "workflow":
        if len(top) > 1:
            raise loc.error(
                tags[top[1]].at,
                f"<{tags[top[1]].name}> follows the <workflow>; a cell holds one <workflow> "
                "and nothing else",
            )
        _check_attributes(head, WORKFLOW_ATTRIBUTES, loc)
        workflow_id = _check_id(head, "workflow", loc)
        step_tags = head.children
        if not step_tags:
            raise loc.error(
                head.at, f"{describe(head)} has no <step>; a workflow needs at least one step"
            )
    else:
        workflow_id, step_tags = IMPLICIT_WORKFLOW_ID, top
    steps: list[Step] = []
    seen: dict[str, int] = {}
    for index in step_tags:
        tag = tags[index]
        if tag.name != "step":
            raise _unexpected_element(tag, tags, loc)
        step = _step(tag, tags, loc, default_timeout)
        if step.id in seen:
            id_attr = tag.attr("id")
            assert id_attr is not None  # _step requires it
            raise loc.error(
                id_attr.value_at,
                f"step id {quoted(step.id)} is used twice (first on line {seen[step.id]}); "
                "step ids must be unique within the workflow",
            )
        seen[step.id] = step.line
        steps.append(step)
    return Workflow(id=workflow_id, steps=tuple(steps), source=text, line_offset=loc.line_offset)


def _unexpected_element(tag: Tag, tags: list[Tag], loc: Locator) -> WomlSyntaxError:
    if tag.name == "retry":
        return loc.error(tag.at, retry_tag_message())
    if tag.parent < 0:
        if tag.name == "workflow":
            return loc.error(
                tag.at,
                "a <workflow> cannot follow top-level <step> elements; put every step "
                "inside one <workflow>",
            )
        where = "at the top of the cell"
        allowed: tuple[str, ...] = ("step", "workflow")
    else:
        parent = tags[tag.parent]
        where = f"inside {describe(parent)}"
        allowed = ("step",) if parent.name == "workflow" else ("script",)
    if tag.name == "script":
        return loc.error(tag.at, f"<script> {where} must be inside a <step>")
    hint = _did_you_mean(tag.name, allowed, "<{}>")
    expected = " or ".join(f"<{a}>" for a in allowed)
    hint = hint or f"{expected} is allowed here"
    return loc.error(tag.at, f"unexpected element <{tag.shown}> {where}; {hint}")


def _step(tag: Tag, tags: list[Tag], loc: Locator, default_timeout: timedelta) -> Step:
    """One ``<step>``: spec §2.2 attributes and §2.3 children."""
    _check_attributes(tag, STEP_ATTRIBUTES, loc)
    step_id = _check_id(tag, "step", loc)
    where = describe(tag)
    attempts = 1
    retry = tag.attr("retry")
    if retry is not None:
        if not _RETRY.fullmatch(retry.value) or int(retry.value) > 10:
            raise loc.error(
                retry.value_at,
                f"retry={quoted(retry.value)} on {where} is not allowed; retry is the total "
                "number of attempts, a whole number from 1 to 10 without sign or leading zero",
            )
        attempts = int(retry.value)
    backoff_attr = tag.attr("retry-backoff")
    backoff = "fixed" if backoff_attr is None else backoff_attr.value
    if backoff not in ("fixed", "exponential"):
        assert backoff_attr is not None
        raise loc.error(
            backoff_attr.value_at,
            f"retry-backoff={quoted(backoff)} on {where} is not allowed; "
            'write retry-backoff="fixed" or retry-backoff="exponential"',
        )
    delay = _duration(tag, "retry-delay", timedelta(seconds=1), loc)
    max_delay = _duration(tag, "retry-max-delay", None, loc)
    if max_delay is not None and delay is not None and max_delay < delay:
        attr = tag.attr("retry-max-delay")
        assert attr is not None
        raise loc.error(
            attr.value_at,
            f"retry-max-delay={quoted(attr.value)} on {where} is shorter than "
            f"retry-delay ({format_duration(delay)}); it must be at least retry-delay "
            "and at most 24h",
        )
    timeout = _duration(tag, "timeout", default_timeout, loc)
    if timeout is not None and timeout <= timedelta(0):
        attr = tag.attr("timeout")
        assert attr is not None
        raise loc.error(
            attr.value_at,
            f"timeout={quoted(attr.value)} on {where} must be longer than 0; "
            "it is the time each attempt may take, at most 24h (default 30s)",
        )
    script = _one_script(tag, tags, loc)
    line, _ = loc.line_col(tag.at)
    script_line, script_column = loc.line_col(script.script_at)
    assert delay is not None  # both have defaults
    assert timeout is not None
    return Step(
        id=step_id,
        script=script.script,
        policy=RetryPolicy(attempts, backoff, delay, max_delay),  # type: ignore[arg-type]
        timeout=timeout,
        line=line,
        script_line=script_line,
        script_column=script_column,
    )


def _one_script(step: Tag, tags: list[Tag], loc: Locator) -> Tag:
    """Spec §2.3: exactly one ``<script>``, whose ``lang`` may only be ``javascript``."""
    found: Tag | None = None
    for index in step.children:
        child = tags[index]
        if child.name != "script":
            raise _unexpected_element(child, tags, loc)
        if found is not None:
            line, _ = loc.line_col(found.at)
            raise loc.error(
                child.at,
                f"{describe(step)} has a second <script> (the first is on line {line}); "
                "a step holds exactly one <script>",
            )
        _check_attributes(child, SCRIPT_ATTRIBUTES, loc)
        lang = child.attr("lang")
        if lang is not None and lang.value != "javascript":
            raise loc.error(
                lang.value_at,
                f"lang={quoted(lang.value)} on the <script> of {describe(step)} is not "
                "supported; the only script language is javascript",
            )
        found = child
    if found is None:
        raise loc.error(
            step.at,
            f"{describe(step)} has no <script>; a step holds exactly one <script>…</script>",
        )
    if found.script_at < 0:  # <script/>: an empty script
        found.script_at = START_TAG.match(loc.text, found.at).end()  # type: ignore[union-attr]
    return found


def _check_attributes(tag: Tag, allowed: tuple[str, ...], loc: Locator) -> None:
    """Spec §2.2: any attribute not in ``allowed`` is an error naming the nearest one."""
    for attr in tag.attrs.values():
        if attr.name not in allowed:
            hint = _did_you_mean(attr.name, allowed, "`{}`")
            names = ", ".join(allowed)
            raise loc.error(
                attr.name_at,
                f"unknown attribute `{attr.shown}` on {describe(tag)}; "
                + (hint or f"the attributes of <{tag.shown}> are {names}"),
            )


def _check_id(tag: Tag, kind: str, loc: Locator) -> str:
    """Spec §2.2: ids match ``[A-Za-z_][A-Za-z0-9_.-]{0,63}``; the id is required."""
    attr = tag.attr("id")
    if attr is None:
        raise loc.error(tag.at, f'<{kind}> needs an id attribute, e.g. <{kind} id="charge">')
    if not ID.fullmatch(attr.value):
        raise loc.error(
            attr.value_at,
            f"id={quoted(attr.value)} on <{kind}> is not a valid id; an id starts with a letter "
            "or _ and continues with up to 63 letters, digits, _, . or -",
        )
    return attr.value


def _duration(tag: Tag, name: str, default: timedelta | None, loc: Locator) -> timedelta | None:
    """A §2.4 duration attribute, at most 24h (spec §2.2)."""
    attr = tag.attr(name)
    if attr is None:
        return default
    try:
        value = _parse_duration(attr.value)
    except DurationError as exc:
        raise loc.error(attr.value_at, f"{name} on {describe(tag)}: {exc}") from None
    if value > MAX_DURATION:
        raise loc.error(
            attr.value_at,
            f"{name}={quoted(attr.value)} on {describe(tag)} is longer than the limit of 24h",
        )
    return value


def _did_you_mean(name: str, allowed: tuple[str, ...], style: str) -> str:
    """The "did you mean …?" clause for the nearest allowed name, if any is near (spec §2.2)."""
    if len(name) > 40:
        return ""
    best = min(allowed, key=lambda a: (_name_distance(name, a), a))
    if _name_distance(name, best) > max(2, len(name) // 2):
        return ""
    return f"did you mean {style.format(best)}?"


def _name_distance(a: str, b: str) -> int:
    """Edit distance that also compares hyphen-separated words as units (spec §2.2).

    ``retry-delay-max`` has the words of ``retry-max-delay`` (distance 0) but is closer
    to ``retry-delay`` by letters; the smaller of the two measures wins. When some word
    matches, a missing word costs 1, an extra word 3 and a misspelt word its letter
    distance; names with no word in common are compared by letters only.
    """
    a, b = a.lower(), b.lower()
    words_a, spare = re.split(r"[-_]", a), re.split(r"[-_]", b)
    cost, matched = 0, False
    for word in words_a:
        near = min(spare, key=lambda w: _edit_distance(word, w), default=None)
        if near is not None and _edit_distance(word, near) <= (1 if len(word) < 5 else 2):
            cost += _edit_distance(word, near)
            spare.remove(near)
            matched = True
        else:
            cost += 3
    letters = _edit_distance(a, b)
    return min(letters, cost + len(spare)) if matched else letters


def _edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: an adjacent transposition (dealy) costs 1."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            best = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                best = min(best, rows[-2][j - 2] + 1)
            row.append(best)
        rows.append(row)
    return rows[-1][-1]

