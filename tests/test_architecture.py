"""The package's layers (docs/architecture.md): which module may import which.

Read from the source with ``ast``, so a new import that crosses a layer fails here
with the module, the import and the rule, before it becomes a tangle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "woml_magic"

#: Each layer and the modules in it (dotted, below ``woml_magic``; a trailing ``.``
#: takes a whole subpackage).
LAYERS: dict[str, tuple[str, ...]] = {
    "vocabulary": ("errors", "outcomes", "limits", "policy", "policy_targets",
                   "policy_translation", "redaction", "events", "clock", "runloop", "_lazy",
                   "javascript"),
    "document": ("model", "scan", "scan_messages", "parse", "explain", "lint", "lint."),
    "runtime": ("runtime.", "runtime"),
    "services": ("services.", "services"),
    "journal": ("journal.", "journal"),
    "resume": ("resume",),
    "engine": ("engine.", "engine"),
    "seam": ("executor", "handle"),
    "api": ("api",),
    "temporal": ("temporal.", "temporal"),
    "lab": ("lab.", "lab"),
    "timeline": ("timeline.", "timeline"),
    "editing": ("editing.", "editing"),
    "demo": ("demo.", "demo"),
    "magic": ("magic.", "magic"),
    "cli": ("__main__",),
    "package": ("",),
}

#: What each layer may import besides itself (spec-level reasons in
#: docs/architecture.md). The vocabulary is everyone's.
ALLOWED: dict[str, set[str]] = {
    "vocabulary": set(),
    "document": {"vocabulary"},
    # The worker builds a stub per service name: ``services.registry`` only.
    "runtime": {"vocabulary", "services.registry"},
    "services": {"vocabulary", "package"},  # package: __version__ for the User-Agent
    "journal": {"vocabulary", "document"},
    "resume": {"vocabulary", "document"},
    "engine": {"vocabulary", "document", "runtime", "services", "resume"},
    "seam": {"vocabulary", "document", "engine"},
    # api names the engines; the Temporal one loads on first use (the optional extra).
    "api": {"vocabulary", "document", "runtime", "engine", "seam", "journal", "resume",
            "temporal"},
    # The lab runs many clients' real runs with the local engine against a model (§11).
    "lab": {"vocabulary", "document", "runtime", "services", "engine", "resume", "timeline"},
    # The Temporal engine reuses the local one's schedule and attempt (spec §9).
    "temporal": {"vocabulary", "document", "runtime", "services", "resume", "engine"},
    "timeline": {"vocabulary", "document"},
    # The editor's pure side (spec §6.4): the parser and linter, and the names of the
    # services and of a request's keys from where they are declared.
    "editing": {"vocabulary", "document", "services.registry", "services.http_request"},
    # A recorded provider reads its cassettes with the one reader (spec §10.4).
    "demo": {"vocabulary", "document", "api", "timeline", "services.cassette"},
    # The magic is a thin adapter: the public API, the parser, errors, its display.
    # (Its settings validate limits and durations with the vocabulary's own checks.)
    "magic": {"api", "parse", "errors", "lint", "timeline", "vocabulary", "lab", "editing"},
    # package: __version__ for ``woml --version``.
    "cli": {"vocabulary", "document", "api", "timeline", "demo", "temporal", "package"},
    "package": {"vocabulary", "document", "api", "seam", "magic", "timeline", "lab"},
}

#: Crossings allowed one by one, each with its reason.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("model", "timeline"): "a Run displays itself in Jupyter (_repr_mimebundle_); the "
                           "timeline loads on first display only",
}

#: Only these may import a front end's libraries (STYLE: nothing below the magic
#: imports IPython or widgets).
FRONT_END = ("IPython", "ipywidgets", "anywidget", "ipykernel", "traitlets")
FRONT_END_ALLOWED = ("magic", "timeline.widget")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    best, best_len = "", -1
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            hit = module.startswith(prefix) if prefix.endswith(".") else module == prefix
            if hit and len(prefix) > best_len:
                best, best_len = layer, len(prefix)
    if best_len < 0:
        raise AssertionError(f"module woml_magic.{module} is in no layer; add it to LAYERS")
    return best


def imports_of(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import of ``path``; internal ones relative to the
    package (``""`` for the package itself), others as written."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    here = module.split(".") if module else []
    if not is_package:
        here = here[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                target = ".".join([*base, *(node.module or "").split(".")]).strip(".")
                if node.module is None:  # from . import x: x may be a module, or a name
                    for alias in node.names:
                        parts = [*base, alias.name]
                        is_module = (PACKAGE.joinpath(*parts).with_suffix(".py").exists()
                                     or PACKAGE.joinpath(*parts).is_dir())
                        found.append((node.lineno,
                                      f"woml_magic:{'.'.join(parts if is_module else base)}"))
                    continue
                found.append((node.lineno, f"woml_magic:{target}"))
            elif node.module:
                mod = node.module
                if mod == "woml_magic" or mod.startswith("woml_magic."):
                    found.append((node.lineno, f"woml_magic:{mod[len('woml_magic.'):]}"
                                  if mod != "woml_magic" else "woml_magic:"))
                else:
                    found.append((node.lineno, mod))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_import_respects_the_layers(path: Path) -> None:
    module = module_name(path)
    layer = layer_of(module)
    allowed = ALLOWED[layer] | {layer}
    for line, target in imports_of(path):
        if not target.startswith("woml_magic:"):
            continue
        name = target.split(":", 1)[1]
        target_layer = layer_of(name) if _known(name) else layer_of(name.rsplit(".", 1)[0])
        ok = target_layer in allowed or name in allowed or any(
            name == a or name.startswith(a + ".") for a in allowed
        ) or (module, name.split(".")[0]) in EXCEPTIONS
        assert ok, (
            f"woml_magic/{path.relative_to(PACKAGE)}:{line} ({layer}) imports "
            f"woml_magic.{name} ({target_layer}); {layer} may import only "
            f"{sorted(allowed)} (docs/architecture.md)"
        )


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_magic_and_the_widget_import_front_end_libraries(path: Path) -> None:
    module = module_name(path)
    if any(module == a or module.startswith(a + ".") for a in FRONT_END_ALLOWED):
        return
    for line, target in imports_of(path):
        top = target.split(".", 1)[0]
        assert top not in FRONT_END, (
            f"woml_magic/{path.relative_to(PACKAGE)}:{line} imports {target}; only "
            f"{FRONT_END_ALLOWED} may import {FRONT_END}"
        )


def test_the_layer_check_sees_a_crossing() -> None:
    """The check itself: the engine importing the magic would be refused."""
    assert "magic" not in ALLOWED["engine"]
    assert layer_of("engine.schedule") == "engine"
    assert layer_of("runtime.worker") == "runtime"
    assert layer_of("services.registry") == "services"
    assert layer_of("") == "package"
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("no_such_module")


def _known(name: str) -> bool:
    try:
        layer_of(name)
    except AssertionError:
        return False
    return True


# -- names from one place (STYLE 14) ----------------------------------------------------

def _registries() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each set of names the package declares once: its module and its names."""
    from woml_magic import api
    from woml_magic.clock import CLOCKS

    return {"clock": ("clock", CLOCKS), "engine": ("api", tuple(api.ENGINES))}


#: Constants declared in exactly one module; everyone else imports them.
DECLARED_ONCE = {"ENGINES": "api", "CLOCKS": "clock", "MAX_CLIENTS": "limits",
                 "MAX_MODEL_CLIENTS": "limits"}


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes of ``tree`` (they may show names as examples)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def restated_names(tree: ast.Module, names: tuple[str, ...]) -> list[tuple[int, str]]:
    """``(line, what)`` where ``tree`` restates two or more of ``names``: a literal tuple,
    list or set of them, or a message that spells them out (``'a' or 'b'``, ``a|b``)."""
    found: list[tuple[int, str]] = []
    docstrings = _docstrings(tree)
    spelt = {f"{names[0]!r} or {names[1]!r}", "|".join(names)} if len(names) > 1 else set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            given = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if len(given & set(names)) > 1:
                found.append((node.lineno, f"a literal {sorted(given & set(names))}"))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docstrings and any(s in node.value for s in spelt)):
            found.append((node.lineno, f"the text {node.value[:60]!r}"))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_clock_and_engine_names_are_declared_once_and_derived_everywhere(path: Path) -> None:
    module = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for kind, (home, names) in _registries().items():
        if module == home:
            continue
        for line, what in restated_names(tree, names):
            raise AssertionError(
                f"woml_magic/{path.relative_to(PACKAGE)}:{line} restates the {kind} names as "
                f"{what}; derive them from woml_magic.{home} (STYLE 14), so registering "
                f"one reaches every surface"
            )
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            home = DECLARED_ONCE.get(target.id) if isinstance(target, ast.Name) else None
            assert home is None or module == home, (
                f"woml_magic/{path.relative_to(PACKAGE)}:{node.lineno} declares "
                f"{target.id} again; it is declared in woml_magic.{home}: import it"
            )


def test_the_names_check_sees_a_restatement() -> None:
    """The check itself: each way of restating names is found, a docstring is not."""
    names = ("real", "simulated")
    source = ('"""Example: --clock real|simulated."""\n'
              'A = ("real", "simulated")\n'
              'def f(x):\n    return x in {"real", "simulated", "x"}\n'
              'B = "use \'real\' or \'simulated\'"\n'
              'C = ["real"]\n')
    assert sorted(line for line, _ in restated_names(ast.parse(source), names)) == [2, 4, 5]


def _literals(tree: ast.Module) -> list[tuple[int, tuple[str, ...]]]:
    """``(line, names)`` of each ``Literal[...]`` of two or more strings in ``tree``."""
    found: list[tuple[int, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        head = node.value if isinstance(node, ast.Subscript) else None
        if getattr(head, "id", getattr(head, "attr", None)) != "Literal":
            continue
        assert isinstance(node, ast.Subscript)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        names = tuple(sorted(i.value for i in items
                             if isinstance(i, ast.Constant) and isinstance(i.value, str)))
        if len(names) > 1:
            found.append((node.lineno, names))
    return found


def test_each_literal_of_names_is_declared_once() -> None:
    """A second ``Literal`` of the same names restates them: name the first (STYLE 14)."""
    first: dict[tuple[str, ...], str] = {}
    for path in SOURCES:
        for line, names in _literals(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"woml_magic/{path.relative_to(PACKAGE)}:{line}"
            assert names not in first, (
                f"{where} declares Literal{list(names)} again (first at {first.get(names)}); "
                "use that alias"
            )
            first[names] = where


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_argparse_choices_are_derived_not_written_out(path: Path) -> None:
    """``choices=`` names a declaration (``CLOCKS``, ``api.ENGINES``, ``PALETTES``), so
    the flag, its help and its completions follow it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.keyword) and node.arg == "choices":
            assert not isinstance(node.value, ast.Tuple | ast.List | ast.Set), (
                f"woml_magic/{path.relative_to(PACKAGE)}:{node.value.lineno} writes out "
                "argparse choices; derive them from where the names are declared"
            )


def test_the_literal_and_choices_checks_see_a_restatement() -> None:
    tree = ast.parse('A = Literal["x", "y"]\nB = t.Literal["y", "x"]\nC = Literal["x"]\n')
    assert _literals(tree) == [(1, ("x", "y")), (2, ("x", "y"))]


# -- one HTTP pipeline (STYLE 13, spec §4.1) ---------------------------------------------

SERVICES = PACKAGE / "services"
#: The modules whose pieces ``HttpService.request`` is assembled from.
PIPELINE_MODULES = ("allow_list", "faults", "http_body", "http_call", "http_outcome",
                    "http_request")
#: Names ``services/http.py`` imports from them that other layers may use anyway.
SHARED = {"Fault": "an EngineConfig carries the injected faults (spec §10.2)"}


def pipeline_pieces() -> set[str]:
    """What ``services/http.py`` builds a call from: every name it imports from the
    pipeline's modules, and its own top-level functions, save ``SHARED``."""
    tree = ast.parse((SERVICES / "http.py").read_text(encoding="utf-8"))
    pieces = {alias.asname or alias.name for node in tree.body
              if isinstance(node, ast.ImportFrom) and node.level == 1
              and node.module in PIPELINE_MODULES for alias in node.names}
    pieces |= {node.name for node in tree.body
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return pieces - set(SHARED)


def _service_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` for every name ``path`` imports from ``woml_magic.services``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None and (
            "services" in node.module.split(".")
        ):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


OUTSIDE_SERVICES = [p for p in SOURCES if not p.is_relative_to(SERVICES)]


def test_the_pipeline_pieces_are_found() -> None:
    """The rule below reads its list from the source: it must see the steps."""
    assert {"parse_request", "call_started", "claim_call", "ManagedCall", "HostAllowList",
            "CallFaults", "read_body", "decode_data", "classify_transport_error",
            "http_error_message"} <= pipeline_pieces()
    assert "HttpService" not in pipeline_pieces()


@pytest.mark.parametrize("path", OUTSIDE_SERVICES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_services_assemble_an_http_call(path: Path) -> None:
    """One pipeline: outside ``services/`` a managed call is made through
    ``HttpService`` (a transport may change where it goes), never from its pieces."""
    pieces = pipeline_pieces()
    for line, name in _service_imports(path):
        assert name not in pieces, (
            f"woml_magic/{path.relative_to(PACKAGE)}:{line} imports {name}, a piece of "
            f"HttpService.request; make the call through HttpService (give it a "
            f"transport= to answer it elsewhere, docs/services-http.md)"
        )


@pytest.mark.parametrize("path", OUTSIDE_SERVICES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_httpx_outside_services_is_a_transport_only(path: Path) -> None:
    """Outside ``services/`` httpx is for a transport under ``HttpService`` (the lab's
    model): such a module defines an ``httpx.AsyncBaseTransport`` and makes no client."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if not any(target == "httpx" or target.startswith("httpx.")
               for _, target in imports_of(path)):
        return
    rel = path.relative_to(PACKAGE)
    transports = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                  and any(ast.unparse(base) == "httpx.AsyncBaseTransport" for base in node.bases)]
    assert transports, f"woml_magic/{rel} imports httpx but defines no httpx.AsyncBaseTransport"
    clients = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and ast.unparse(node) in ("httpx.AsyncClient", "httpx.Client")]
    assert not clients, (
        f"woml_magic/{rel}:{clients[0]} makes an httpx client: a second pipeline; give "
        "HttpService a transport instead"
    )


# -- names once (STYLE 14) -----------------------------------------------------------------


def _literal_aliases(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` of each module-level ``Name = Literal[...]`` of ``path``."""
    return [(node.lineno, target.id)
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript)
            and ast.unparse(node.value.value) in ("Literal", "typing.Literal")
            for target in node.targets if isinstance(target, ast.Name)]


def test_outcomes_and_statuses_are_declared_in_outcomes_only() -> None:
    """spec §3.2, §4.1: an outcome type is declared once, in ``outcomes.py``; another
    module that needs one imports it (``http_outcome`` takes ``CallFailure``)."""
    vocabulary = {name for _, name in _literal_aliases(PACKAGE / "outcomes.py")}
    assert {"Outcome", "CallOutcome", "CallFailure"} <= vocabulary
    for path in SOURCES:
        if path.name == "outcomes.py" and path.parent == PACKAGE:
            continue
        for line, name in _literal_aliases(path):
            assert name not in vocabulary, (
                f"woml_magic/{path.relative_to(PACKAGE)}:{line} declares {name}, which "
                f"outcomes.py declares; import it from there (STYLE 14)"
            )


def test_each_literal_type_is_declared_once() -> None:
    """STYLE 14: two ``Literal`` types of one name are two vocabularies under one word."""
    seen: dict[str, str] = {}
    for path in SOURCES:
        for line, name in _literal_aliases(path):
            here = f"woml_magic/{path.relative_to(PACKAGE)}:{line}"
            assert name not in seen, f"{here} declares {name}, as {seen[name]} does"
            seen[name] = here


# -- one clock (STYLE 13, spec §5.1, §11) --------------------------------------------------
#: The clocks' names: the interface and its implementations in ``clock.py``.
CLOCK_CLASSES = {"Clock", "RealClock", "SimulatedClock", "ShiftedClock"}

#: Clocks implemented outside ``clock.py``, each with its reason: none is a virtual clock.
OTHER_CLOCKS: dict[tuple[str, str], str] = {
    ("temporal.workflow", "WorkflowClock"): "Temporal's deterministic time: Temporal keeps "
                                            "the timers, the class only reads and asks",
}


def clock_subclasses(path: Path) -> list[tuple[int, str, str]]:
    """``(line, class, base)`` for every class of ``path`` based on one of the clocks."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name in CLOCK_CLASSES:
                    found.append((node.lineno, node.name, name))
    return found


def asyncio_privates() -> set[str]:
    """The private attribute names of asyncio's loops, futures, tasks and handles."""
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        names = set(vars(loop))
    finally:
        loop.close()
    for cls in (type(loop), asyncio.Future, asyncio.Task, asyncio.Handle, asyncio.TimerHandle,
                asyncio.Queue, asyncio.Event, asyncio.Lock, asyncio.Semaphore):
        names |= set(dir(cls))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_reads(path: Path, privates: set[str]) -> list[tuple[int, str]]:
    """``(line, source)`` for every read of one of ``privates`` on something not ``self``:
    ``x._ready``, or ``getattr(x, "_ready")``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        on_other = (isinstance(node, ast.Attribute) and node.attr in privates
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls")))
        by_name = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) > 1
                   and isinstance(node.args[1], ast.Constant) and node.args[1].value in privates)
        if on_other or by_name:
            found.append((node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_clock_py_implements_a_clock(path: Path) -> None:
    """STYLE 13: one virtual clock, with knobs; a lab or an engine that needs other time
    sets a knob of ``SimulatedClock`` rather than keeping a timer heap of its own."""
    module = module_name(path)
    if module == "clock":
        return
    for line, name, base in clock_subclasses(path):
        assert (module, name) in OTHER_CLOCKS, (
            f"woml_magic/{path.relative_to(PACKAGE)}:{line}: class {name}({base}) is a "
            "clock outside clock.py; give clock.SimulatedClock the knob it needs "
            "(rate, stall_s, on_idle, epoch_s) or use its view()"
        )


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_reads_asyncio_privates_but_the_clocks_idle_check(path: Path) -> None:
    """The one peek (no public way exists) is ``clock.loop_has_ready_callbacks``: the
    loop's ready queue, and each queued handle's callback (to tell a clock's look from
    work)."""
    allowed = {"getattr(loop, '_ready', None)", "getattr(handle, '_callback', None)"} \
        if module_name(path) == "clock" else set()
    for line, source in private_reads(path, asyncio_privates()):
        assert source in allowed, (
            f"woml_magic/{path.relative_to(PACKAGE)}:{line} reads asyncio's private "
            f"{source}; use the public API, or clock.loop_has_ready_callbacks"
        )


def test_the_clock_rules_see_a_second_clock_and_a_peek(tmp_path: Path) -> None:
    """The checks themselves: a timer heap of the lab's own, and a peek at the loop."""
    source = tmp_path / "second.py"
    source.write_text("import asyncio\nfrom ..clock import Clock, SimulatedClock\n"
                      "class LabClock(Clock):\n    pass\n"
                      "class Faster(clock.SimulatedClock):\n    pass\n"
                      "def idle(loop):\n    return not loop._ready and not getattr(loop, "
                      "'_scheduled')\n", encoding="utf-8")
    assert [(name, base) for _, name, base in clock_subclasses(source)] == [
        ("LabClock", "Clock"), ("Faster", "SimulatedClock")]
    assert [s for _, s in private_reads(source, asyncio_privates())] == [
        "loop._ready", "getattr(loop, '_scheduled')"]
    assert OTHER_CLOCKS.keys() == {("temporal.workflow", "WorkflowClock")}


# -- modules a reader can hold (issue 23; STYLE 1: one concept a module) -------------------

#: The most lines a module of the package may have.
MAX_MODULE_LINES = 450
#: Modules allowed more, each one concept that splitting would hurt, with the reason.
#: (None today: every module that grew past the bound was split along a seam.)
LONG_MODULES: dict[str, str] = {}


def lines_of(path: Path) -> int:
    """How many lines ``path`` has, as ``wc -l`` counts them."""
    return path.read_bytes().count(b"\n")


def too_long(paths: list[Path], root: Path = PACKAGE) -> list[tuple[str, int]]:
    """``(module path, lines)`` for each of ``paths`` over ``MAX_MODULE_LINES`` and not
    in ``LONG_MODULES``."""
    found = []
    for path in paths:
        rel = path.relative_to(root).as_posix()
        count = lines_of(path)
        if count > MAX_MODULE_LINES and rel not in LONG_MODULES:
            found.append((rel, count))
    return found


def test_every_module_is_at_most_450_lines_unless_named_with_its_reason() -> None:
    over = too_long(SOURCES)
    assert not over, (
        f"{', '.join(f'woml_magic/{rel} has {n} lines' for rel, n in over)}; a module "
        f"holds at most {MAX_MODULE_LINES}: split it along a seam into modules named by "
        "the spec's nouns, or, if it is one concept, name it in LONG_MODULES with why"
    )
    for rel, reason in LONG_MODULES.items():  # an entry is a module that is still long
        assert lines_of(PACKAGE / rel) > MAX_MODULE_LINES, f"{rel} is short now: drop it"
        assert reason.strip(), f"LONG_MODULES[{rel!r}] gives no reason"


def test_the_size_rule_sees_a_long_module(tmp_path: Path) -> None:
    """The check itself: one line past the bound is found, the bound itself is not."""
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    (tmp_path / "full.py").write_text("x = 1\n" * MAX_MODULE_LINES, encoding="utf-8")
    paths = sorted(tmp_path.glob("*.py"))
    assert too_long(paths, tmp_path) == [("long.py", MAX_MODULE_LINES + 1)]


# -- one JavaScript lexer (STYLE 13, spec §2.3, §4.5) --------------------------------------
#: The one module that reads JavaScript text; everyone else asks it (tokens, ``unclosed``,
#: ``Lines``).
LEXER = "javascript"
#: What only a JavaScript lexer looks for in text: comments and template substitutions.
LEXER_MARKS = ("//", "/*", "*/", "${")
#: JavaScript's line terminators beyond the cell's (the cell ends lines at LF and CR only).
ENGINE_LINE_BREAKS = ("\u2028", "\u2029")
#: String searches a lexer makes.
_SEARCHES = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "split",
             "partition", "rpartition"}
#: Modules that hold such text for another reason, each with its reason.
OTHER_MARKS: dict[str, str] = {
    "timeline.markup": "U+2028-U+202E among the invisible characters the timeline shows "
                       "escaped: text shown, not JavaScript read",
}


def lexer_marks(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, what)`` where ``tree`` reads JavaScript itself: a search for a comment or
    template marker (``text.startswith("//")``, ``"*/" in gap``), a regular expression
    of a comment, JavaScript's own line terminators, or a private name of the lexer."""
    found: list[tuple[int, str]] = []

    def marks(node: ast.expr) -> list[str]:
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        return [i.value for i in items
                if isinstance(i, ast.Constant) and i.value in LEXER_MARKS]

    for node in ast.walk(tree):
        searches = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _SEARCHES and any(marks(a) for a in node.args))
        contains = (isinstance(node, ast.Compare) and marks(node.left)
                    and isinstance(node.ops[0], ast.In | ast.NotIn))
        if searches or contains:
            found.append((node.lineno, f"a search for a comment marker: {ast.unparse(node)}"))
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).startswith("re.")
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and re.search(r"/\\\*|//\[\^|//\.\*", node.args[0].value)):
            found.append((node.lineno, f"a regular expression of a comment: {ast.unparse(node)}"))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and any(b in node.value for b in ENGINE_LINE_BREAKS)):
            found.append((node.lineno, "JavaScript's line terminators U+2028/U+2029"))
        elif (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == LEXER
              and any(a.name.startswith("_") for a in node.names)):
            found.append((node.lineno, f"the lexer's private {ast.unparse(node)}"))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_lexer_reads_javascript(path: Path) -> None:
    """One JavaScript lexer (issue 23 item 7): two disagreed on line terminators and on
    when a ``/`` starts a regular expression. Another module that needs to know what is
    code, a comment or a string, or where QuickJS's lines start, asks ``javascript``."""
    module = module_name(path)
    if module in (LEXER, *OTHER_MARKS):
        return
    for line, what in lexer_marks(ast.parse(path.read_text(encoding="utf-8"))):
        raise AssertionError(
            f"woml_magic/{path.relative_to(PACKAGE)}:{line} reads JavaScript itself ({what}); "
            f"use woml_magic.javascript (tokenize, unclosed, Lines) instead"
        )


def test_the_lexer_rule_sees_a_second_lexer() -> None:
    """The check itself: each way the two old lexers and their helpers read JavaScript."""
    source = ('"""A doc may say // and /* freely."""\n'
              "import re\n"
              "from woml_magic.javascript import tokenize, _regex_end\n"
              "_SPACE = re.compile(r'(?:\\s+|//[^\\n]*|/\\*.*?\\*/)*')\n"
              "_URL = re.compile(r'([a-z]+://)([^/?#]*)@')\n"
              "_BREAKS = frozenset('\\n\\r\\u2028\\u2029')\n"
              "def in_comment(gap):\n"
              "    return gap.rfind('//') >= 0 or '*/' not in gap\n"
              "def skip(src, i):\n"
              "    return src.startswith(('//', '/*'), i) or src.startswith('${', i)\n"
              "HATCH = {'hatch': '//'}\n")
    assert sorted(line for line, _ in lexer_marks(ast.parse(source))) == [3, 4, 6, 8, 8, 10, 10]
    assert set(OTHER_MARKS) == {"timeline.markup"}
