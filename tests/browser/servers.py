"""JupyterLab 4 and Notebook 7 on 127.0.0.1, isolated from the user's Jupyter setup.

Each server gets its own ``JUPYTER_CONFIG_DIR``/``JUPYTER_DATA_DIR``/
``JUPYTER_RUNTIME_DIR``/``IPYTHONDIR`` and its own root folder (so one app's autosave
never touches a file the other has open). Lab's user settings turn off news and update
checks (no request may leave 127.0.0.1) and render every cell (``windowingMode``
``none``): the tests measure what the user sees, and off-screen cells that the
browser skips rendering have no computed layout to measure.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]

#: Lab's user settings (also read by Notebook 7, which is built on the same plugins).
USER_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    # Theme switches are the tests' to make; start every page in the light theme.
    "@jupyterlab/apputils-extension/themes": {"theme": "JupyterLab Light"},
}

#: How each app is started; ``path`` is where a notebook opens.
APPS = {
    "lab": {
        "argv": [
            "lab",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        # A workspace per page: two pages of one workspace would fight over its layout.
        "path": "lab/workspaces/{workspace}/tree/{name}",
    },
    "notebook": {
        "argv": ["notebook", "--JupyterNotebookApp.expose_app_in_browser=True"],
        "path": "notebooks/{name}",
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def isolated_env(home: Path) -> dict[str, str]:
    """The environment of a server and its kernels: nothing outside ``home``."""
    env = dict(os.environ)
    for name in (
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_DATA_DIR",
        "JUPYTER_RUNTIME_DIR",
        "IPYTHONDIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
    ):
        path = home / name.lower()
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env.pop(proxy, None)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


#: The kernelspec of the second kernel environment (.ci/run makes it: ipykernel 6).
IPYKERNEL6 = "woml-ipykernel6"


def write_ipykernel6_spec(data_dir: Path) -> None:
    """A kernelspec for ``WOML_IPYKERNEL6_PYTHON`` beside the default one, if it is set."""
    python = os.environ.get("WOML_IPYKERNEL6_PYTHON")
    if not python:
        return
    spec = data_dir / "kernels" / IPYKERNEL6
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel 6)",
        "language": "python",
    }))


def write_user_settings(config_dir: Path) -> None:
    for plugin, values in USER_SETTINGS.items():
        path = config_dir / "lab" / "user-settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@dataclass
class JupyterServer:
    """One running Jupyter app; ``url(name)`` opens a notebook of ``root`` in it."""

    app: str
    root: Path
    home: Path
    port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    process: subprocess.Popen[bytes] | None = None
    startup_seconds: float = 0.0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.home / f"{self.app}.log"

    def url(self, name: str, workspace: str = "") -> str:
        path = APPS[self.app]["path"].format(name=name, workspace=workspace or secrets.token_hex(4))
        return f"{self.base}/{path}?token={self.token}"

    def start(self, timeout: float = 120.0) -> JupyterServer:
        env = isolated_env(self.home)
        write_user_settings(Path(env["JUPYTER_CONFIG_DIR"]))
        write_ipykernel6_spec(Path(env["JUPYTER_DATA_DIR"]))
        argv = [
            sys.executable,
            "-m",
            "jupyter",
            *APPS[self.app]["argv"],
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
        ]
        t0 = time.monotonic()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root
            )
        deadline = t0 + timeout  # generous: CI machines can be busy
        with httpx.Client(trust_env=False) as client:
            while True:
                try:
                    status = client.get(f"{self.base}/api/status", params={"token": self.token})
                    if status.is_success:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise AssertionError(f"{self.app} did not start:\n{self.log_tail()}")
                time.sleep(0.2)
        self.startup_seconds = time.monotonic() - t0
        return self

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        with self.log_path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def api(self, method: str, path: str) -> httpx.Response:
        with httpx.Client(trust_env=False, timeout=30) as client:
            return client.request(
                method, f"{self.base}/api/{path}", headers={"Authorization": f"token {self.token}"}
            )

    def shutdown_kernels(self) -> None:
        """Shut down every kernel of this server (ours: the server started them)."""
        try:
            kernels = self.api("GET", "kernels").json()
        except (httpx.HTTPError, ValueError):
            return
        for kernel in kernels:
            with contextlib.suppress(httpx.HTTPError):
                self.api("DELETE", f"kernels/{kernel['id']}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.shutdown_kernels()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
