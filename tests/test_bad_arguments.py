"""Every bad fault, lab or engine argument is a ``WomlError`` with one sentence naming it
and what is allowed (issue 24 item 6; spec §10.2, §11, STYLE 6); in the magic it is one
usage line (IPython's ``UsageError`` itself); digits are ASCII everywhere.

Before: ``faults=["c@1=status=²"]`` raised a bare ``ValueError`` from ``int()``, 5,000
attempt digits ``ValueError: Exceeds the limit (4300 digits)``, ``status=٥٠٣`` was
accepted as 503; ``wm.lab(outage=(1, 2, 3))`` and an outage of durations gave
``ValueError``/``TypeError``; in the magic ``--fault 'c@1=status=²'`` printed a
traceback, ``--clients ５`` and ``--capacity １`` were read as 5 and 1, and a second
``--outage`` silently replaced the first. The lab models one outage window, so a second
one is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import woml_magic as wm
from woml_magic.errors import WomlError
from woml_magic.lab import LabArgumentError
from woml_magic.lab.server import outage_window
from woml_magic.services.faults import parse_fault, parse_faults

DOC = '<step id="a"><script>return 1;</script></step>'


# -- faults (spec §10.2) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (
            "c@1=status=²",
            "answers with status '²'; status=NNN takes an error status from 400 "
            "to 599 in ASCII digits",
        ),
        ("c@1=status=٥٠٣", "answers with status '٥٠٣'"),  # int() would read it as 503
        ("c@1=status=503" + "0" * 10_000, "answers with status '50300000000…'"),
        ("c@" + "9" * 5000 + "=network-error", "attempts are numbered from 1 to 10"),
        ("c@11=network-error", "names attempt 11; attempts are numbered from 1 to 10"),
        ("c@１=network-error", "is not CALL@ATTEMPT=KIND"),
        ("c@1=delay=１s", "invalid duration '１s'"),
    ],
)
def test_a_bad_fault_is_one_bounded_sentence(fault: str, says: str) -> None:
    with pytest.raises(WomlError) as info:
        wm.run(DOC, clock="simulated", faults=[fault])
    message = str(info.value)
    assert says in message
    assert len(message) < 400, len(message)
    assert "\n" not in message


@pytest.mark.parametrize(
    ("faults", "says"),
    [
        (5, "faults must be a list of CALL@ATTEMPT=KIND strings, not int"),
        ({"call": "c", "attempt": "１", "kind": "network-error"}, "'c@１=network-error' is not"),
        (
            {"call": "c", "attempt": 1, "kind": "delay", "seconds": "abc"},
            "delays 'abc' seconds; a number of seconds from 0 to 24h is allowed",
        ),
    ],
)
def test_faults_of_the_wrong_shape_are_one_sentence(faults: Any, says: str) -> None:
    with pytest.raises(WomlError) as info:
        parse_faults(faults)
    assert says in str(info.value)


def test_one_fault_dict_is_one_fault() -> None:
    assert parse_faults({"call": "c", "attempt": 2, "kind": "network-error"}) == (
        parse_fault("c@2=network-error"),
    )


# -- wm.lab (spec §11) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (
            {"outage": (1, 2, 3)},
            'invalid outage (1, 2, 3); give outage as "10s..40s" or (start, end)',
        ),
        ({"outage": 5}, "invalid outage 5"),
        ({"outage": (float("nan"), 1)}, "nan is neither seconds nor a duration"),
        ({"outage": ("1s", "soon")}, "invalid duration 'soon'"),
        (
            {"outage": ["1s..2s", "5s..6s"]},
            "gives 2 windows; the lab's model has one outage window",
        ),
        (
            {"capacity": "5"},
            "capacity must be a positive number of requests per second or None, got '5'",
        ),
        ({"throttle": "yes"}, "throttle must be True, False or None, got 'yes'"),
        ({"what_if": 5}, 'what_if must be an overlay such as "jitter=full"'),
        (
            {"what_if": "budget=１0%"},
            "budget '１0%' is not a percentage; write it with % and ASCII digits",
        ),
        ({"arrivals": "poisson:２0/s"}, "invalid arrivals 'poisson:２0/s'"),
        ({"arrivals": 5}, 'arrivals must be "at-once"'),
        ({"server": "http://10.0.0.1:80"}, "a lab sends real requests only to this machine"),
    ],
)
def test_a_bad_lab_argument_is_one_woml_error_sentence(options: dict[str, Any], says: str) -> None:
    with pytest.raises(WomlError) as info:
        wm.lab(DOC, clients=1, **options)
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_an_outage_of_durations_or_seconds_is_one_window() -> None:
    assert outage_window(("1s", "2.5s")) == (1.0, 2.5)
    assert outage_window([1, 2]) == (1.0, 2.0)
    assert outage_window("1s..2s") == (1.0, 2.0)
    result = wm.lab(DOC, clients=1, outage=("0s", "1s"))
    assert result.server is not None
    assert result.server.outage == (0.0, 1.0)


def test_an_unknown_lab_keyword_is_a_woml_error_and_a_type_error() -> None:
    with pytest.raises(LabArgumentError) as info:
        wm.lab(DOC, clients=1, outages="1s..2s")  # type: ignore[call-arg]
    assert isinstance(info.value, WomlError)
    assert isinstance(info.value, TypeError)
    with pytest.raises(LabArgumentError, match="WOML text or a Workflow, not int"):
        wm.lab(5, clients=1)  # type: ignore[arg-type]


# -- the magic: one usage line naming the flag ----------------------------------------------


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ("--fault 'c@1=status=²'", "the fault 'c@1=status=²' answers with status '²'"),
        ("--fault 'c@1=status=٥٠٣'", "answers with status '٥٠٣'"),
        ("--fault c@" + "9" * 5000 + "=network-error", "attempts are numbered from 1 to 10"),
        ("--clients 50000", "--clients 50000: give 1 to 10,000 clients"),
        ("--clients ５", "argument --clients: '５' is not a whole number; write ASCII digits"),
        ("--clients 3 --seed ٣", "argument --seed: '٣' is not a whole number"),
        ("--clients 3 --capacity -5", "--capacity -5: give a positive number"),
        ("--clients 3 --capacity nan", "argument --capacity: 'nan' is not a number"),
        ("--clients 3 --capacity 1e999", "--capacity inf: give a positive number"),
        ("--clients 3 --capacity １", "argument --capacity: '１' is not a number"),
        (
            "--clients 3 --outage 40s..10s",
            "--outage 40s..10s: invalid outage '40s..10s': it "
            "ends at 10s, not after it starts at 40s",
        ),
        (
            "--clients 3 --outage 1s..2s --outage 5s..6s",
            "argument --outage: given twice ('1s..2s', then '5s..6s'); give it once",
        ),
        ("--clients 3 --clients 4", "argument --clients: given twice"),
        ("--clients 3 --what-if jitter=bogus", "--what-if jitter=bogus: unknown jitter 'bogus'"),
        (
            "--clients 3 --what-if budget=１0%",
            "--what-if budget=１0%: budget '１0%' is not a percentage",
        ),
        (
            "--clients 3 --server http://10.0.0.1:80",
            "--server http://10.0.0.1:80: a lab sends real requests only to this machine",
        ),
        (
            "--clients 50000",
            "(woml_magic.limits.MAX_CLIENTS: each is a real run of the scripts in this "
            "kernel; the model-only path, woml_magic.lab.simulate, takes up to 100,000)",
        ),
        ("--clients 3 --server demo", "--server demo: the lab does not start the demo API"),
        (
            "--clients 3 --server http://127.0.0.1:9 --capacity 5",
            "--capacity needs a server model, and --server http://127.0.0.1:9 is a real API: "
            "drop --capacity, or give a model: --server unlimited | capacity | throttle | occ",
        ),
        (
            "--clients 3 --server http://127.0.0.1:9 --outage 1s..2s",
            "--outage needs a server model, and --server http://127.0.0.1:9 is a real API",
        ),
        ("--clients 3 --server http://127.0.0.1:9 --throttle", "--throttle needs a server model"),
        (
            "--clients 3 --server http://127.0.0.1:9 --what-if jitter=full",
            "--what-if needs a server model",
        ),
    ],
)
def test_a_bad_flag_is_one_usage_line(ip: InteractiveShell, flags: str, says: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("woml", flags, DOC)
    assert type(info.value) is UsageError  # IPython prints subclasses with a traceback
    message = str(info.value)
    assert says in message
    assert "\n" not in message
    assert len(message) < 400, len(message)


# -- policy.to: the same policy in another engine (spec §11) ----------------------------


@pytest.mark.parametrize(
    ("target", "says"),
    [
        (
            "bogus",
            "unknown target 'bogus': choose one of temporal, stepfunctions, tenacity, stamina",
        ),
        ("Temporal", "did you mean 'temporal'?"),
        (5, "unknown target 5: choose one of"),
        (None, "unknown target None: choose one of"),
        (["temporal"], "unknown target ['temporal']: choose one of"),
    ],
)
def test_an_unknown_engine_target_is_one_woml_error_sentence(target: Any, says: str) -> None:
    policy = wm.parse('<step id="a" retry="3"><script>return 1;</script></step>').steps[0].policy
    with pytest.raises(WomlError) as info:
        policy.to(target)
    assert says in str(info.value)
    assert isinstance(info.value, ValueError)  # as before: callers catching it keep working


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"engine": "z" * 100_000}, "unknown engine 'zzz"),
        ({"clock": "c" * 100_000}, "unknown clock 'ccc"),
        ({"run_id": "r" * 100_000}, "is not allowed; use 1 to 128 printable characters"),
    ],
)
def test_a_huge_bad_engine_argument_is_quoted_as_a_window(
    options: dict[str, Any], says: str
) -> None:
    with pytest.raises(WomlError) as info:
        wm.run(DOC, **options)
    assert says in str(info.value)
    assert len(str(info.value)) < 200
