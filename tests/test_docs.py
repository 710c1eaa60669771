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


# --- docs/spec.md: the sections every "spec §N" cites ------------------------------

ROOT = DOCS.parent

#: Every section of the specification, number → title. docs/spec.md keeps these numbers
#: and titles (they are stable: code, docs, notebooks and messages cite them).
SPEC_SECTIONS = {
    "1": "What the product is",
    "2": "Documents",
    "2.1": "Cell forms",
    "2.2": "`<step>` attributes",
    "2.3": "Children of `<step>`",
    "2.4": "Durations",
    "2.5": "Errors in documents",
    "3": "Retry semantics",
    "3.1": "Schedule",
    "3.2": "Attempt outcomes",
    "3.3": "Results",
    "3.4": "The `attempt` object",
    "3.5": "Idempotency key",
    "3.6": "The `context` object",
    "4": "Services available to scripts",
    "4.1": "`services.http.request(request, options)`",
    "4.2": "The ambiguity guard",
    "4.3": "Reattaching to managed outcomes",
    "4.4": "Other services",
    "4.5": "The script worker",
    "5": "Clocks and the journal",
    "5.1": "Clocks",
    "5.2": "The journal",
    "5.3": "Resume",
    "6": "Notebook interface",
    "6.1": "The cell magic",
    "6.2": "The line magic",
    "6.3": "The timeline",
    "6.4": "Editing a cell",
    "6.5": "Shared notebooks",
    "7": "Python API",
    "8": "The demo API",
    "9": "Engines: local and Temporal",
    "10": "Prototyping against real APIs",
    "10.1": "Secrets",
    "10.2": "Injected faults",
    "10.3": "Key lineage",
    "10.4": "Record and replay",
    "11": "The lab",
}

FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)
#: A numbered heading of docs/spec.md: "## 3. Retry semantics", "### 3.2 Attempt outcomes".
SPEC_HEADING = re.compile(r"(\d+(?:\.\d+)*)\.? (.+)")


def headings(name: str) -> list[str]:
    """The headings of docs/``name``, outside fenced code."""
    return HEADING.findall(FENCED.sub("", doc(name)))


def spec_sections() -> dict[str, str]:
    """docs/spec.md's numbered headings, number → title."""
    found = [SPEC_HEADING.fullmatch(h) for h in headings("spec.md")]
    return {m[1]: m[2] for m in found if m}


def test_spec_has_every_section_with_its_number_and_title() -> None:
    assert spec_sections() == SPEC_SECTIONS


#: A section sign and its number.
SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
#: A citation: one section, or a list or range of them ("§3.1, §3.2", "§4.1–§4.3").
CHAIN = re.compile(r"§\d+(?:\.\d+)*(?:(?:\s*[,–-]\s*|,?\s+(?:and|or)\s+)§\d+(?:\.\d+)*)*")
#: Other documents' sections, not the spec's: "RFC 9110 §10.2.3", "XML 1.0 §2.2, §2.11".
FOREIGN = re.compile(r"(?:RFC \d+|XML \d+\.\d+)\s*$")
#: The spec cited without a section sign: "spec 3.1's retry=10 example".
BARE = re.compile(r"\bspec (\d+\.\d+)\b")


def spec_citations(text: str) -> list[tuple[int, str]]:
    """(line, section) of every citation of the spec in ``text``.

    Every section sign cites the spec ("spec §3.2", "(§4.5)", "§3.5's", "spec §3.1,
    §3.2", "§4.1–§4.3"), except a list that follows another document's name (an RFC,
    XML 1.0); so does "spec 3.1" without the sign.
    """

    found = [(m.start(), m[1]) for m in BARE.finditer(text)]
    for chain in CHAIN.finditer(text):
        if FOREIGN.search(text[max(0, chain.start() - 20) : chain.start()]):
            continue
        found += [(chain.start() + m.start(), m[1]) for m in SECTION.finditer(chain[0])]
    return [(text.count("\n", 0, at) + 1, number) for at, number in sorted(found)]


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("the magic (spec §6)", [(1, "6")]),
        ("outcomes (§3.2), keys\n(spec §3.5)", [(1, "3.2"), (2, "3.5")]),
        ("§5.3's sentence", [(1, "5.3")]),
        ("(spec §6.1, §9, §10)", [(1, "6.1"), (1, "9"), (1, "10")]),
        ("(spec §3.4, §3.5, §4.1-§4.3)", [(1, "3.4"), (1, "3.5"), (1, "4.1"), (1, "4.3")]),
        ("`services.http.request` (spec §4.1–§4.3)", [(1, "4.1"), (1, "4.3")]),
        ("spec §3.1,\n§3.2 and §3.3", [(1, "3.1"), (2, "3.2"), (2, "3.3")]),
        ("render of spec 3.1's retry=10 example", [(1, "3.1")]),
        ("delay-seconds (RFC 9110 §10.2.3)", []),
        ("line ends (XML 1.0 §2.2, §2.11); spec §2.3", [(1, "2.3")]),
    ],
)
def test_spec_citations_are_read_in_every_form_the_code_uses(
    text: str, cited: list[tuple[int, str]]
) -> None:
    assert spec_citations(text) == cited


#: Folders of built or installed JavaScript (a prebuilt labextension's ``static/``):
#: generated text, not ours, so not read for citations.
GENERATED = {"static", "node_modules"}


def citing_files() -> list[Path]:
    """Where the spec is cited for users: docs, README, notebooks and their sources,
    and the package's code (docstrings, comments, messages)."""
    notebooks = ROOT / "notebooks"
    package = ROOT / "woml_magic"
    code = [*package.rglob("*.py"), *package.rglob("*.js")]
    return sorted({
        *DOCS.glob("*.md"),
        ROOT / "README.md",
        *notebooks.glob("*.py"),
        *notebooks.glob("*.ipynb"),
        *(path for path in code if not GENERATED & set(path.relative_to(package).parts)),
    })


def test_every_spec_citation_is_a_section_of_docs_spec() -> None:
    sections = set(spec_sections())
    cited = [
        (path.relative_to(ROOT), line, number)
        for path in citing_files()
        for line, number in spec_citations(path.read_text(encoding="utf-8"))
    ]
    assert len(cited) > 500  # the reader finds the citations, so "none missing" means something
    missing = [f"{path}:{line}: §{n}" for path, line, n in cited if n not in sections]
    assert not missing, "cited sections that docs/spec.md does not have:\n" + "\n".join(missing)


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped (``§``,
    dashes, backticks, dots), each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_spec_links_point_at_pages_and_headings_that_exist() -> None:
    links = re.findall(r"\]\(([^)#:]+)(?:#([^)]*))?\)", doc("spec.md"))
    assert len(links) > 30
    for target, fragment in links:
        assert (DOCS / target).exists(), f"spec.md links to missing {target}"
        if fragment:
            anchors = {anchor(h) for h in headings(target)}
            assert fragment in anchors, f"spec.md links to {target}#{fragment}: no such heading"


def test_every_docs_link_to_a_heading_finds_it() -> None:
    """A link from one docs page (or the README) to a heading of a docs page names a
    heading that exists, as GitHub spells its anchor (dates and times in headings lose
    their colons and dashes)."""
    pages = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
    checked, broken = 0, []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target, fragment in re.findall(r"\]\(([^)#:\s]*)#([^)\s]+)\)", text):
            path = (page.parent / target).resolve() if target else page
            if path.parent != DOCS or path.suffix != ".md":
                continue
            checked += 1
            if fragment not in {anchor(h) for h in headings(path.name)}:
                broken.append(f"{page.name} → {path.name}#{fragment}")
    assert checked > 50  # the pages do link to headings, so "none broken" means something
    assert not broken, "links to headings that do not exist:\n" + "\n".join(broken)


def test_reference_links_its_section_numbers_to_the_spec() -> None:
    assert "Section numbers refer to the\n[specification](spec.md)" in doc("reference.md")
