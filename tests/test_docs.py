"""The user docs say what the code does (STYLE 12): schedules, signatures, links.

Each test ties a statement in docs/ to the behaviour it describes, so an edit to
either side that breaks the agreement fails here.
"""

from __future__ import annotations

import inspect
import re
from datetime import timedelta
from pathlib import Path

import pytest
import tenacity

import woml_magic as wm

DOCS = Path(__file__).resolve().parents[1] / "docs"


def doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


# spec §3.1: the schedule examples of docs/semantics.md, row text → waits in seconds.
SEMANTICS_SCHEDULES = [
    ('`retry="3"` (fixed, 1s) | 1s, 1s', '<step id="s" retry="3">', [1, 1]),
    (
        '`retry="4" retry-backoff="exponential" retry-delay="1s" retry-max-delay="10s"` '
        "| 1s, 2s, 4s",
        '<step id="s" retry="4" retry-backoff="exponential" retry-delay="1s" '
        'retry-max-delay="10s">',
        [1, 2, 4],
    ),
    (
        '`retry="10" retry-backoff="exponential" retry-delay="1s" retry-max-delay="30s"` '
        "| 1, 2, 4, 8, 16, 30, 30, 30, 30 s",
        '<step id="s" retry="10" retry-backoff="exponential" retry-delay="1s" '
        'retry-max-delay="30s">',
        [1, 2, 4, 8, 16, 30, 30, 30, 30],
    ),
    (
        '`retry="5" retry-backoff="exponential" retry-delay="250ms"` | 250ms, 500ms, 1s, 2s',
        '<step id="s" retry="5" retry-backoff="exponential" retry-delay="250ms">',
        [0.25, 0.5, 1, 2],
    ),
]


@pytest.mark.parametrize(("row", "opening", "waits"), SEMANTICS_SCHEDULES)
def test_semantics_schedule_examples_are_the_policy_waits(
    row: str, opening: str, waits: list[float]
) -> None:
    assert row in doc("semantics.md")
    policy = wm.parse(f"{opening}<script>return 1;</script></step>").steps[0].policy
    assert policy.waits() == [timedelta(seconds=w) for w in waits]


def test_comparison_equivalents_give_the_same_schedule_as_tenacity() -> None:
    # docs/comparison.md: retry="4" exponential 1s max 10s is tenacity's
    # stop_after_attempt(4) with wait_exponential(multiplier=1, max=10).
    text = doc("comparison.md")
    assert "retry(stop=stop_after_attempt(4), wait=wait_exponential(multiplier=1, max=10))" in text
    assert '"MaxAttempts": 3' in text
    policy = wm.parse(
        '<step id="s" retry="4" retry-backoff="exponential" retry-delay="1s" '
        'retry-max-delay="10s"><script>return 1;</script></step>'
    ).steps[0].policy
    wait = tenacity.wait_exponential(multiplier=1, max=10)
    stop = tenacity.stop_after_attempt(4)
    oracle = []
    for attempt in range(1, 10):
        state = tenacity.RetryCallState(None, None, (), {})
        state.attempt_number = attempt
        if stop(state):
            break
        oracle.append(wait(state))
    assert [w.total_seconds() for w in policy.waits()] == oracle


def shown(default: object) -> str:
    """A default as the docs write it: strings in double quotes, as in the code."""
    return f'"{default}"' if isinstance(default, str) else repr(default)


@pytest.mark.parametrize("function", ["run", "run_async", "start"])
def test_python_api_doc_lists_every_parameter_with_its_default(function: str) -> None:
    text = doc("python-api.md")
    block = text[text.index("wm.run(text_or_workflow") :]
    block = block[: block.index("```")]
    for param in inspect.signature(getattr(wm, function)).parameters.values():
        if param.default is inspect.Parameter.empty:
            assert param.name in block
        else:
            written = rf"\b{param.name}: [^=]+= {re.escape(shown(param.default))}[,)]"
            assert re.search(written, block), param.name


def test_python_api_doc_shows_the_parse_signature() -> None:
    text = doc("python-api.md")
    names = list(inspect.signature(wm.parse).parameters)
    assert names == ["text", "line_offset", "default_timeout"]
    assert "wm.parse(text: str, *, line_offset: int = 0," in text
    assert "default_timeout: datetime.timedelta | None = None) -> Workflow" in text


USER_DOCS = [
    "quickstart.md",
    "semantics.md",
    "python-api.md",
    "troubleshooting.md",
    "comparison.md",
]


@pytest.mark.parametrize("name", USER_DOCS)
def test_relative_links_point_at_files_that_exist(name: str) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc(name)):
        assert (DOCS / target).exists(), f"{name} links to missing {target}"
