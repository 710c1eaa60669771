"""Notebook 06 offline: its shipped recording, replayed with the network blocked
(spec §10.4), and that recording made again holds no secret (spec §10.1).

``notebooks/cassettes/06-prototyping-an-integration/`` holds one cassette a run of the
notebook (``NAME.jsonl``, the cell's ``{tape("NAME")}``), recorded against the live
``PaymentProvider`` by ``WOML_06_MODE=record``. ``WOML_06_MODE=offline`` replays it.
The offline kernel has a Python audit hook, installed by an IPython startup file
before any cell runs, that refuses every socket operation that could reach a network
(creating an internet socket, ``connect``, ``bind``, name lookups, ``sendto``) and
writes down each attempt. Jupyter's own channels are libzmq's sockets, not Python's,
so the kernel keeps talking to the test.
"""

# nbformat ships no type information (STYLE 8).
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from test_notebooks import (
    NOTEBOOKS_DIR,
    PROVIDER_TEST_KEY,
    execute,
    problems,
    stdout_lines,
)
from test_secret_echoes import echo_forms
from test_secrets import assert_nowhere

from woml_magic.demo import ProviderRecording
from woml_magic.services.secrets import reference

NOTEBOOK = NOTEBOOKS_DIR / "06-prototyping-an-integration.ipynb"
SHIPPED = NOTEBOOKS_DIR / "cassettes" / "06-prototyping-an-integration"

#: Installed in the kernel before the notebook's first cell (IPython runs
#: profile_default/startup/*.py at start-up, after the kernel's zmq sockets are bound).
NETWORK_BLOCK = """
def _install():
    # In a function: nothing lands in the notebook's namespace, and the hook holds its
    # own references (IPython clears the user namespace at exit: a hook that read it
    # would fail open).
    import socket, sys, traceback, types

    block = types.ModuleType("network_block")
    block.attempts = []
    # Every socket operation that can reach a network; a socket of AF_UNIX (asyncio's
    # self-pipe is a socketpair) is made without one.
    block.EVENTS = frozenset({
        "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
        "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo",
        "socket.sendto", "socket.sendmsg",
    })
    local = getattr(socket, "AF_UNIX", None)

    def refuse(event, args):
        if event not in block.EVENTS:
            return
        if event == "socket.__new__" and args[1] == local:
            return
        caller = [f for f in traceback.extract_stack()[:-1]
                  if not f.filename.endswith("socket.py")][-1]
        block.attempts.append(f"{event} {args[1:]!r}"[:200]
                              + f" at {caller.filename}:{caller.lineno}")
        raise OSError(f"network blocked by the test: {event}")

    sys.modules["network_block"] = block
    sys.addaudithook(refuse)


_install()
del _install
"""

#: Appended to the notebook: what the hook saw while the notebook ran, then the control:
#: a live-mode cell (it starts the provider on 127.0.0.1) in the same kernel.
REPORT = 'import network_block\nprint("network attempts:", json.dumps(network_block.attempts))'
CONTROL = (
    "from woml_magic.demo import PaymentProvider\n"
    'PaymentProvider(secret_key="sk_test_control").start()'
)


def blocked_kernel(cwd: Path) -> dict[str, str]:
    """The startup file in the kernel's IPython directory (``kernel_env``'s), so the
    hook is in place before the notebook's first cell."""
    startup = cwd / "ipythondir" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-network-block.py").write_text(NETWORK_BLOCK, encoding="utf-8")
    return {"WOML_06_MODE": "offline"}


def shown_text(nb: nbformat.NotebookNode) -> dict[str, str]:
    return {
        cell.source.splitlines()[0]: " ".join(out.data["text/plain"].split())
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type in ("display_data", "execute_result")
    }


def shape(folder: Path) -> dict[str, list[tuple[object, ...]]]:
    """Each recorded run's exchanges as the lesson depends on them: the call, the
    request, the status and whether the provider replayed it (no ids, times or keys)."""
    recording = ProviderRecording(folder)
    for name in recording.names:
        recording.tape(name)
    out: dict[str, list[tuple[object, ...]]] = {name: [] for name in recording.names}
    for r in recording.requests:
        out[r.tape].append((r.name, r.method, r.path, r.status, r.replayed))
    return out


def tapes_in_the_notebook() -> list[str]:
    source = NOTEBOOK.with_suffix(".py").read_text(encoding="utf-8")
    return sorted(set(re.findall(r'\{tape\("([a-z-]+)"\)\}', source)))


def test_the_shipped_recording_has_a_tape_for_each_run_of_the_notebook_and_no_secret() -> None:
    # spec §10.4: one cassette a recorded run, against one provider; spec §10.1: the
    # key notebook 06 makes up (and CI's) starts sk_test_, and no form of it is there.
    recording = ProviderRecording(SHIPPED)
    assert sorted(recording.names) == tapes_in_the_notebook()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", recording.url)
    for path in sorted(SHIPPED.glob("*.jsonl")):
        assert_nowhere(path.read_bytes(), str(path), values=["sk_test_"], forms=echo_forms)
    for name in recording.names:
        recording.tape(name)
    assert {r.headers.get("Authorization") for r in recording.requests} == {"•••"}


@pytest.mark.kernel
def test_notebook_06_runs_offline_from_the_shipped_recording_with_the_network_blocked(
    tmp_path: Path,
) -> None:
    # The teacher's hand-out: the notebook with its cassettes folder beside it.
    shutil.copytree(SHIPPED, tmp_path / SHIPPED.relative_to(NOTEBOOKS_DIR))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells += [
        nbformat.v4.new_code_cell("import json\n" + REPORT),
        nbformat.v4.new_code_cell(CONTROL),
        nbformat.v4.new_code_cell(REPORT),
    ]
    nb = execute(NOTEBOOK, tmp_path, nb=nb, env=blocked_kernel(tmp_path))

    *notebook, control = problems(nb)
    assert notebook == []  # every cell of the notebook ran, none failed
    # The control: the live half in the same kernel is refused by the hook.
    assert "OSError: network blocked by the test: socket." in control
    lines = stdout_lines(nb)
    attempts = [
        json.loads(line.split(": ", 1)[1])
        for line in lines
        if line.startswith("network attempts: ")
    ]
    assert attempts[0] == []  # the whole notebook: not one network call
    assert attempts[1], "the control cell made no attempt the hook saw"

    # The lesson's outcomes and lineage, as the live run's test reads them (spec §10.2,
    # §10.3, §8, §10.1), from the recording.
    for fact in (
        "run: failed | attempts: 1 | outcome: ambiguous",
        "charges recorded: 1",
        f"the provider said: 401: Invalid API Key provided: {reference('PROVIDER_TEST_KEY')}x",
        "the key in any Run: False",
        "the key in the journal's and the cassettes' files: False",
        "requests the provider received since the reset: 5",
        "  with Authorization kept as •••: 5",
        "  answered 200 (the key was right): 4",
        "  answered 401 (the key was wrong): 1",
    ):
        assert fact in lines, "\n".join(lines)
    assert any(
        line.startswith(
            "<PaymentProvider as recorded in cassettes/06-prototyping-an-integration: 4 runs, "
        )
        and "nothing listens at" in line
        for line in lines
    )
    shown = shown_text(nb)
    keyed = shown['lineage_table(keyed, records=provider.records("charges"))']
    assert "2 requests carried the key: 1 no answer, 1 replayed" in keyed
    assert "so the server executed this one and its answer was lost" in keyed
    assert "Idempotent-Replayed: true" in keyed
    assert keyed.endswith("ledger: 1 charge recorded")
    again = shown['lineage_table(again, records=provider.records("charges"))']
    assert "1 request carried no key" in again
    assert again.endswith("ledger: 2 charges recorded: a duplicate")
    assert any(line.startswith("offline, `keyed` above is already the replay") for line in lines)


@pytest.mark.kernel
def test_notebook_06_records_what_it_ships_and_the_recording_holds_no_secret(
    tmp_path: Path,
) -> None:
    # WOML_06_MODE=record is how the shipped folder is made (docs/services-http.md):
    # made again here, it has the shipped one's exchanges (a notebook changed without
    # recording again fails here), and no form of the key that was sent (spec §10.1).
    nb = execute(NOTEBOOK, tmp_path, env={"WOML_06_MODE": "record"})
    assert problems(nb) == []
    assert "the same lineage, live and replayed: True" in stdout_lines(nb)
    fresh = tmp_path / SHIPPED.relative_to(NOTEBOOKS_DIR)
    assert shape(fresh) == shape(SHIPPED)
    for path in sorted(fresh.glob("*.jsonl")):
        assert_nowhere(path.read_bytes(), str(path), values=[PROVIDER_TEST_KEY], forms=echo_forms)
    assert reference("PROVIDER_TEST_KEY").encode() in (fresh / "typo.jsonl").read_bytes()

    # The whole notebook offline from that recording: every key lineage and ledger as
    # the live run showed it, but for the run ids and the keys derived from them.
    offline = execute(NOTEBOOK, tmp_path, env={"WOML_06_MODE": "offline"})
    assert problems(offline) == []
    live, replayed = lineages(nb), lineages(offline)
    assert len(live) == 2
    assert replayed == live


def lineages(nb: nbformat.NotebookNode) -> dict[str, str]:
    """The ``lineage_table(...)`` cells' text, run ids and keys left out (spec §3.5: a
    key is derived from its run's id, and each run has its own)."""
    anonymous = re.compile(
        r"run-[0-9a-f]{12}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
        r"[0-9a-f]{12}"
    )
    return {
        line: anonymous.sub("…", text)
        for line, text in shown_text(nb).items()
        if line.startswith("lineage_table(")
    }


@pytest.mark.kernel
@pytest.mark.parametrize(
    ("mode", "error"),
    [
        (
            "offlne",
            "ValueError: MODE (WOML_06_MODE) is 'offlne'; use 'live', 'offline' or 'record'",
        ),
        # offline without the cassettes folder beside the notebook: where it looked
        (
            "offline",
            "CassetteError: cassettes/06-prototyping-an-integration: no such folder "
            "of cassettes (looked in ",
        ),
    ],
)
def test_notebook_06_refuses_a_bad_mode_or_a_missing_recording_saying_what_is_allowed(
    tmp_path: Path, mode: str, error: str
) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    first = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"][1]
    nb.cells = nb.cells[: first + 1]  # the switch and the set-up cell
    nb = execute(NOTEBOOK, tmp_path, nb=nb, env={"WOML_06_MODE": mode})
    found = problems(nb)
    assert len(found) == 1
    assert f"cell {first}: {error}" in found[0]
