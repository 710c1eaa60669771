"""Limits: one table, one check, the same refusal on every surface (spec §4.5, §6.1).

``woml_magic.limits.LIMIT_RANGES`` says what each limit may be set to; ``Limits``
checks it when made. The Python API, ``%config Woml`` and ``woml run`` all refuse an
out-of-range value with that one sentence, and nothing runs.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

import woml_magic as wm
from woml_magic.engine import EngineConfig
from woml_magic.errors import WomlLimitError, WomlRunError
from woml_magic.limits import LIMIT_RANGES, LIMITS, Limits
from woml_magic.magic import WomlMagics
from woml_magic.magic.settings import Woml

DOCS = Path(__file__).resolve().parents[1] / "docs"
_MIB = 1024 * 1024
DOC = '<step id="s"><script>return "x".repeat(200);</script></step>'


def settings(ip: InteractiveShell) -> Woml:
    found = ip.magics_manager.registry[WomlMagics.__name__]
    assert isinstance(found, WomlMagics)
    return found.settings


def woml_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "woml_magic", *args], capture_output=True,
                          text=True, encoding="utf-8", timeout=60, check=False)


@pytest.mark.parametrize(
    ("name", "value", "sentence"),
    [
        ("max_log_lines", 2_000_000,
         "max_log_lines 2000000 is out of range; use 1 to 1000000 lines"),
        ("memory_limit_mb", 4, "memory_limit_mb 4 is out of range; use 8 to 4096 MiB"),
        ("max_json_depth", 600, "max_json_depth 600 is out of range; use 1 to 512 levels"),
        ("max_result_bytes", 0, "max_result_bytes 0 is out of range; use 1 to 67108864 bytes"),
    ],
)
def test_the_api_config_and_cli_refuse_the_same_value_with_the_same_sentence(
    ip: InteractiveShell, caplog: pytest.LogCaptureFixture, tmp_path: Path,
    name: str, value: int, sentence: str,
) -> None:
    # The Python API: the config cannot even be made, so no run starts.
    with pytest.raises(WomlLimitError) as info:
        wm.run(DOC, clock="simulated", config=EngineConfig(limits=Limits(**{name: value})))
    assert str(info.value) == sentence
    assert (info.value.limit, info.value.value) == (name, value)
    # %config: the same sentence, named as the setting; the old value stays.
    before = getattr(settings(ip), name)
    with caplog.at_level(logging.ERROR):
        ip.run_line_magic("config", f"Woml.{name} = {value}")
    assert f"Woml.{sentence}" in caplog.text
    assert getattr(settings(ip), name) == before
    # woml run: the same sentence, exit status 1, nothing run.
    doc = tmp_path / "doc.xml"
    doc.write_text(DOC, encoding="utf-8")
    out = woml_cli("run", "--simulate", f"--{name.replace('_', '-')}", str(value), str(doc))
    assert (out.returncode, out.stdout, out.stderr) == (1, "", f"woml run: {sentence}\n")


@pytest.mark.parametrize("name", sorted(LIMIT_RANGES))
def test_each_limit_takes_its_range_and_refuses_past_either_end(name: str) -> None:
    low, high, _unit = LIMIT_RANGES[name]
    assert getattr(Limits(**{name: low}), name) == low
    assert getattr(Limits(**{name: high}), name) == high
    for bad, bound in ((low - 1, low), (high + 1, high)):
        with pytest.raises(WomlLimitError, match=f"^{name} {bad} is out of range; use ") as info:
            Limits(**{name: bad})
        assert info.value.allowed == bound
    for not_int in ("5", 5.0, True, None):
        with pytest.raises(WomlRunError, match=f"^{name} .* is not an integer; use {low} to "):
            Limits(**{name: not_int})


def test_every_limit_is_a_setting_with_the_limits_default() -> None:
    """``%config Woml`` has one setting per field of ``Limits``, derived, not restated."""
    assert set(LIMIT_RANGES) == set(LIMITS) == {f.name for f in fields(Limits)}
    woml = Woml()
    assert woml.limits() == Limits()
    for name, limit in LIMITS.items():
        assert woml.trait_metadata(name, "config") is True
        assert woml.traits()[name].default_value == limit.default == getattr(Limits(), name)
        assert LIMIT_RANGES[name] == (limit.low, limit.high, limit.unit)
    woml.max_result_bytes = 100
    assert woml.engine_config().limits == Limits(max_result_bytes=100)


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_each_limits_help_says_what_it_bounds_its_spec_section_and_its_range(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str], name: str,
) -> None:
    """The help ``%config Woml`` prints is the limit's declaration (spec §6.1)."""
    limit = LIMITS[name]
    assert re.search(r"\(spec §\d", limit.help), limit.help
    assert settings(ip).traits()[name].help == (
        f"{limit.help} Allowed: {limit.low} to {limit.high} {limit.unit}.")
    ip.run_line_magic("config", "Woml")
    shown = " ".join(capsys.readouterr().out.split())  # the help is wrapped
    entry = shown[shown.index(f"Woml.{name}="):]
    assert entry.startswith(f"Woml.{name}=<Int> {limit.help} Allowed: {limit.low} to "
                            f"{limit.high} {limit.unit}. Current: {limit.default}")


def test_a_result_limit_given_to_the_api_or_the_cli_reaches_the_attempt(tmp_path: Path) -> None:
    run = wm.run(DOC, clock="simulated",
                 config=EngineConfig(limits=Limits(max_result_bytes=100)))
    only = run.steps["s"].attempts[0]
    assert only.outcome == "oversized"
    assert "the limit is 100 bytes" in (only.error.message if only.error else "")
    doc = tmp_path / "doc.xml"
    doc.write_text(DOC, encoding="utf-8")
    out = woml_cli("run", "--simulate", "--max-result-bytes", "100", str(doc))
    assert out.returncode == 1
    assert "oversized" in out.stdout
    assert woml_cli("run", "--simulate", str(doc)).returncode == 0


def _doc_row(doc: str, first_cell: str) -> str:
    """The row of a table in ``docs/doc`` whose first cell is ``first_cell``."""
    for line in (DOCS / doc).read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| {first_cell} |"):
            return line
    raise AssertionError(f"docs/{doc} has no row {first_cell}")


def _written(value: int, unit: str) -> str:
    """A bound as docs/runtime.md writes it: bytes in MiB or GiB, counts with commas."""
    if unit == "bytes" and value >= _MIB:
        return f"{value // 1024 // _MIB} GiB" if value % (1024 * _MIB) == 0 else (
            f"{value // _MIB} MiB")
    return f"{value} MiB" if unit == "MiB" else f"{value:,}"


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_the_docs_limits_table_shows_each_limits_declared_range(name: str) -> None:
    limit = LIMITS[name]
    row = _doc_row("runtime.md", f"`{name}`")
    assert f"| {limit.low:,} … {_written(limit.high, limit.unit)} |" in row, row


def test_the_docs_settings_table_names_every_setting() -> None:
    table = "\n".join(line for line in (DOCS / "magic.md").read_text(encoding="utf-8")
                      .split("## Configuration (`%config Woml`)")[1].splitlines()
                      if line.startswith("| `"))
    named = {name for cell in (line.split("|")[1] for line in table.splitlines())
             for name in re.findall(r"`(\w+)`", cell)}
    assert named == set(Woml.class_traits(config=True))
