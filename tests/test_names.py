"""Names once, derived everywhere (STYLE 14; spec §5.1 clocks, §6.1 and §6.4 the magic,
§9 engines, §11 the lab's client limit).

An engine is declared by registering it in ``api.ENGINES``, a clock by the ``ClockKind``
``Literal`` (``clock.CLOCKS``): the magic's ``--engine``/``--clock`` choices, the ``Woml``
settings' validators, the editor's completions, the API's checks and the docs' tables
all follow. ``tests/test_architecture.py`` keeps the names from being restated.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import woml_magic as wm
from woml_magic import api
from woml_magic.clock import CLOCKS, ClockKind, as_clock, make_clock
from woml_magic.errors import WomlRunError, one_of
from woml_magic.executor import Executor
from woml_magic.lab import LabModelError
from woml_magic.lab.simulate import simulate
from woml_magic.limits import MAX_CLIENTS, MAX_MODEL_CLIENTS
from woml_magic.magic import WomlMagics
from woml_magic.parse import parse

ROOT = Path(__file__).resolve().parents[1]
DOC = '<step id="s"><script>return 1;</script></step>'


@pytest.fixture
def ip(ip: InteractiveShell) -> InteractiveShell:
    return ip


@pytest.fixture
def dummy() -> Iterator[list[str]]:
    """An engine registered in ``api.ENGINES`` for the test (the local one under another
    name, recording each run it makes), removed after it."""
    made: list[str] = []

    def factory(opts: Any) -> Executor:
        made.append(opts.engine)
        return api.ENGINES["local"](opts)

    assert "dummy" not in api.ENGINES
    api.ENGINES["dummy"] = factory
    yield made
    del api.ENGINES["dummy"]


def settings(ip: InteractiveShell) -> Any:
    magics = ip.magics_manager.registry[WomlMagics.__name__]
    assert isinstance(magics, WomlMagics)
    return magics.settings


def test_an_engine_registered_in_the_api_is_a_choice_of_the_magic_and_of_config(
    ip: InteractiveShell, dummy: list[str]
) -> None:
    # spec §9: registered after the extension loaded, and still a --engine choice.
    run = ip.run_cell_magic("woml", "--engine dummy --simulate --no-timeline", DOC)
    assert run.status == "succeeded"
    assert dummy == ["dummy"]
    ip.run_line_magic("config", 'Woml.engine = "dummy"')
    assert settings(ip).engine == "dummy"
    assert ip.run_cell_magic("woml", "--simulate --no-timeline", DOC).status == "succeeded"
    assert dummy == ["dummy", "dummy"]
    with pytest.raises(UsageError, match=r"invalid choice: 'nosuch' \(choose from 'local', "
                                         r"'temporal', 'dummy'\)"):
        ip.run_cell_magic("woml", "--engine nosuch", DOC)


def test_an_engine_removed_from_the_api_is_refused_everywhere(
    ip: InteractiveShell, caplog: pytest.LogCaptureFixture
) -> None:
    api.ENGINES["dummy"] = api.ENGINES["local"]
    ip.run_line_magic("config", 'Woml.engine = "dummy"')
    del api.ENGINES["dummy"]
    with pytest.raises(UsageError, match="invalid choice: 'dummy'"):
        ip.run_cell_magic("woml", "--engine dummy", DOC)
    ip.run_line_magic("config", 'Woml.engine = "temporal"')
    ip.run_line_magic("config", 'Woml.engine = "dummy"')
    assert settings(ip).engine == "temporal"
    assert "Woml.engine 'dummy' is not an engine; use 'local' or 'temporal'" in caplog.text
    with pytest.raises(WomlRunError, match="unknown engine 'dummy'; use 'local' or 'temporal'"):
        wm.run(DOC, engine="dummy")


def test_the_editor_completes_a_registered_engine(
    ip: InteractiveShell, dummy: list[str]
) -> None:
    # spec §6.4: the choices after --engine are the parser's, read at each request.
    code = "%%woml --engine \n" + DOC
    cursor = len("%%woml --engine ")
    with provisionalcompleter():
        texts = [c.text for c in ip.Completer.completions(code, cursor)]
    assert texts == [*api.ENGINES]
    assert "dummy" in texts


def test_the_clocks_are_the_literals_and_every_surface_takes_exactly_them(
    ip: InteractiveShell,
) -> None:
    assert CLOCKS == get_args(ClockKind) == ("real", "simulated")
    parser = ip.magics_manager.registry[WomlMagics.__name__].woml_cell.parser
    clock_flag = next(a for a in parser._actions if "--clock" in a.option_strings)
    assert tuple(clock_flag.choices) == CLOCKS
    for kind in CLOCKS:
        assert make_clock(kind).kind == kind == as_clock(kind)
    with pytest.raises(ValueError, match="unknown clock 'sundial'; use 'real' or 'simulated'"):
        as_clock("sundial")
    with pytest.raises(WomlRunError, match="unknown clock 'sundial'; use 'real' or 'simulated'"):
        wm.run(DOC, clock="sundial")  # type: ignore[typeddict-item]
    assert one_of(CLOCKS) in str(settings(ip).traits()["clock"].help)


@pytest.mark.parametrize(
    ("names", "text"),
    [((), "(none)"), (("a",), "'a'"), (("a", "b"), "'a' or 'b'"),
     (("a", "b", "c"), "'a', 'b' or 'c'")],
)
def test_one_of_offers_the_names_as_a_message_does(names: tuple[str, ...], text: str) -> None:
    assert one_of(names) == text


def _row(doc: str, first_cell: str) -> str:
    """The row of a docs table whose first cell is ``first_cell``."""
    for line in (ROOT / "docs" / doc).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if "|" in line else []
        if cells and cells[0].startswith(first_cell):
            return line
    raise AssertionError(f"docs/{doc} has no row {first_cell}")


def test_the_docs_tables_name_exactly_the_declared_clocks_and_engines() -> None:
    bar = "\\|"  # a | inside a table cell
    assert f"`--clock {bar.join(CLOCKS)}`" in _row("magic.md", "`--clock")
    assert f"`--engine {bar.join(api.ENGINES)}`" in _row("magic.md", "`--engine")
    assert ", ".join(f'`"{c}"`' for c in CLOCKS) in _row("magic.md", "`clock`")
    assert ", ".join(f'`"{e}"`' for e in api.ENGINES) in _row("magic.md", "`engine`")


def test_the_two_client_limits_are_declared_once_and_each_refusal_names_both(
    ip: InteractiveShell,
) -> None:
    """spec §11: a lab's clients are real runs (``MAX_CLIENTS``), the model path's are
    counts (``MAX_MODEL_CLIENTS``); each refusal says its bound, why, and the other."""
    assert MAX_CLIENTS < MAX_MODEL_CLIENTS
    real = (f"1 to {MAX_CLIENTS:,} clients (woml_magic.limits.MAX_CLIENTS: each is a real "
            "run of the scripts in this kernel; the model-only path, woml_magic.lab.simulate,"
            f" takes up to {MAX_MODEL_CLIENTS:,})")
    with pytest.raises(UsageError) as shown:
        ip.run_cell_magic("woml", f"--clients {MAX_CLIENTS + 1}", DOC)
    assert str(shown.value) == f"--clients {MAX_CLIENTS + 1}: give {real}"
    with pytest.raises(LabModelError) as refused:
        wm.lab(DOC, clients=MAX_CLIENTS + 1)
    assert str(refused.value) == (
        f"clients must be a whole number from {real}; got {MAX_CLIENTS + 1}")
    step = parse('<step id="s" retry="2"><script>return 1;</script></step>').steps[0]
    with pytest.raises(LabModelError) as modelled:
        simulate(step.policy, MAX_MODEL_CLIENTS + 1)
    assert str(modelled.value) == (
        f"clients must be a whole number from 1 to {MAX_MODEL_CLIENTS:,} clients "
        "(woml_magic.limits.MAX_MODEL_CLIENTS: the model path runs no scripts; a lab of "
        f"real runs takes up to {MAX_CLIENTS:,}); got {MAX_MODEL_CLIENTS + 1}")
    assert simulate(step.policy, MAX_CLIENTS + 1).clients == MAX_CLIENTS + 1


def test_the_settings_defaults_are_declared_names(ip: InteractiveShell) -> None:
    woml = settings(ip)
    assert woml.clock in CLOCKS
    assert woml.engine in api.ENGINES
    assert f'`"{woml.clock}"`' in _row("magic.md", "`clock`")
    assert f'`"{woml.engine}"`' in _row("magic.md", "`engine`")
