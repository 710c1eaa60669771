"""The editor extension as it ships (spec §6.4, docs/editor.md): ``labextension/prebuilt``
is what its sources build, and JupyterLab finds the installed copy.

The bundle is committed, so that ``pip install`` needs no Node.js; the wheel's
shared-data puts it in ``<prefix>/share/jupyter/labextensions/woml-magic``, for an
editable install too (a copy made at install time). The first test rebuilds it from
the sources in a temporary folder — ``npm run build`` (tsc and @jupyter/builder) with
the ``node_modules`` that ``npm ci`` installed from the committed lock file beside the
sources (``.ci/run`` does that; a test reaches no registry) — and compares the two
trees byte for byte: a source edited without rebuilding, or a rebuild left uncommitted, fails here
with the files that differ. (The bundle's module ids are named by relative paths,
``labextension/rspack.config.js``, so a build is the same wherever it is made.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import woml_magic

ROOT = Path(__file__).resolve().parent.parent
LABEXT = ROOT / "labextension"
PREBUILT = LABEXT / "prebuilt"
NAME = "woml-magic"
#: What the build reads (node_modules comes from the lock file).
SOURCES = ["package.json", "package-lock.json", "tsconfig.json", "rspack.config.js", "src"]


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative path."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def require_npm() -> str:
    """npm, and the extension's node_modules (``npm ci`` in labextension/, which
    ``.ci/run`` runs): missing, the test skips outside CI and fails in it."""
    npm = shutil.which("npm")
    missing = ("npm is not installed" if npm is None else
               "labextension/node_modules is missing (run `npm ci` in labextension/)"
               if not (LABEXT / "node_modules" / ".package-lock.json").is_file() else None)
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}: CI must check the prebuilt extension")
        pytest.skip(f"{missing}; CI checks the prebuilt extension")
    assert npm is not None
    return npm


@pytest.mark.slow
def test_the_prebuilt_extension_is_what_its_sources_build(tmp_path: Path) -> None:
    npm = require_npm()
    work = tmp_path / "labextension"
    work.mkdir()
    for name in SOURCES:
        source = LABEXT / name
        if source.is_dir():
            shutil.copytree(source, work / name)
        else:
            shutil.copy2(source, work / name)
    # `jupyter-builder` (the build script's) is this interpreter's, from jupyterlab.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    env.update(npm_config_audit="false", npm_config_fund="false",
               npm_config_update_notifier="false")
    (work / "node_modules").symlink_to(LABEXT / "node_modules", target_is_directory=True)
    done = subprocess.run([npm, "run", "build", "--offline"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    output = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, f"npm run build:\n{output}"
    built, committed = tree(work / "prebuilt"), tree(PREBUILT)
    stale = sorted(name for name in built.keys() & committed.keys()
                   if built[name] != committed[name])
    assert (sorted(built.keys() - committed.keys()), sorted(committed.keys() - built.keys()),
            stale) == ([], [], []), (
        "labextension/prebuilt is not what labextension/src builds (new, gone, changed "
        "files): run `npm ci && npm run build` in labextension/ and commit prebuilt/"
    )


def test_the_extension_is_named_and_versioned_as_the_package() -> None:
    for path in (LABEXT / "package.json", PREBUILT / "package.json"):
        data = json.loads(path.read_text())
        assert (data["name"], data["version"]) == (NAME, woml_magic.__version__), path
    install = json.loads((LABEXT / "install.json").read_text())
    assert install["packageName"] == NAME
    load = json.loads((PREBUILT / "package.json").read_text())["jupyterlab"]["_build"]["load"]
    assert (PREBUILT / load).is_file(), f"the entry point {load} is not in prebuilt/"


def test_jupyterlab_finds_the_installed_extension_and_it_is_this_build(tmp_path: Path) -> None:
    # What `pip install -e .` installed, as `jupyter labextension list` sees it (with a
    # config folder of its own: a user's settings may not disable it here).
    from jupyter_core.paths import jupyter_path

    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    listed = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    installed = [Path(p) / NAME for p in jupyter_path("labextensions") if (Path(p) / NAME).is_dir()]
    assert installed, (
        f"{NAME} is not installed where JupyterLab looks ({jupyter_path('labextensions')}): "
        "`python -m pip install -e .` puts labextension/prebuilt there"
    )
    assert re.search(rf"{NAME} v{re.escape(woml_magic.__version__)} enabled\s+OK", listed), listed
    shipped = {**tree(PREBUILT), "install.json": (LABEXT / "install.json").read_bytes()}
    assert tree(installed[0]) == shipped, (
        f"{installed[0]} is an older build: re-run `python -m pip install -e .` (an editable "
        "install copies labextension/prebuilt at install time)"
    )
