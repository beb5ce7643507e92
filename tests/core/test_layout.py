"""The house: a layout a newcomer can live in.

No import circle among the harness's modules, no module or function too long to read,
one exception tree whose every member survives a trip between processes.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import pickle
import re

import pytest

import metadata_builders.errors as errors
import metadata_builders.families.dsv4.errors as dsv4_errors

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("metadata_builders", "strategies")
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (annotations only: never imported)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """Modules of ``known`` that ``name`` imports when it runs, at module level or inside a function."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            # ``from pkg import sub`` imports the module ``pkg.sub``;
            # ``from pkg import name`` takes a name of pkg's face
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], stack[len(stack):] = 1, [node]
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_imports_itself_in_a_circle() -> None:
    """Following imports (module level or inside functions) from any module never leads back to it.

    A package's ``__init__`` counts as importing what it re-exports, so a loop through a
    package's face is a loop (``session -> audit -> audit.core -> ... -> session`` was one);
    imports only under ``if TYPE_CHECKING:`` are not imports.
    """
    modules = _modules()
    known = set(modules)
    graph = {name: _imports(name, path, known) for name, path in modules.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def _package(name: str) -> str:
    """The package a module belongs to at the hall's level: ``metadata_builders.audit``, a family
    (``metadata_builders.families.dsv4``), or ``strategies``."""
    parts = name.split(".")
    if parts[0] == "strategies":
        return "strategies"
    return ".".join(parts[:3] if len(parts) >= 3 and parts[1] == "families" else parts[:2])


def test_no_package_imports_one_that_imports_it_back() -> None:
    """At the hall's level too: no two packages (the core's rooms, each family) import each other, whichever
    modules the arrows start from (the session, the audit's records and the DSV4 capabilities record moved so)."""
    modules = _modules()
    known = set(modules)
    arrows: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for name, path in modules.items():
        for target in _imports(name, path, known):
            if _package(name) != _package(target):
                arrows.setdefault((_package(name), _package(target)), []).append((name, target))
    back = {pair: arrows[pair][:2] for pair in arrows if pair[::-1] in arrows and pair[0] < pair[1]}
    assert not back, back


PUBLIC_LINE = frozenset({"metadata_builders/__init__.py", "strategies/__init__.py"})
"""The facade (DESIGN.md section 4): the names the README documents, re-exported from where they live -- the one
place outside a family package that may name one."""


def _core_files() -> list[pathlib.Path]:
    return [path for path in [*(ROOT / "metadata_builders").rglob("*.py"), *(ROOT / "strategies").rglob("*.py")]
            if not str(path.relative_to(ROOT)).startswith("metadata_builders/families/")
            and str(path.relative_to(ROOT)) not in PUBLIC_LINE]


def test_the_core_names_no_family() -> None:
    """No core module imports a family's module or names one in its text (a docstring's path, an importlib string):
    the core takes a family's pieces through the registry (``metadata_builders.families``: ``family_main``,
    ``family_subject``, ``family_piece``), by the family's name as data."""
    naming = {str(path.relative_to(ROOT)) for path in _core_files() if "metadata_builders.families." in path.read_text()
              or "metadata_builders/families/" in path.read_text()}
    assert not naming, f"core modules that name a family: {sorted(naming)}"


def _dsv4_vocabulary() -> set[str]:
    """The DSV4 family's own words: its field names, its batch's and geometry's attributes, its model's classes."""
    import dataclasses

    from metadata_builders.families.dsv4 import batch, metadata

    words = set(metadata.FIELD_NAMES)
    for cls in (batch.VerifyBatch, batch.Geometry, batch.GraphTier, batch.Compression, batch.Divergence):
        words |= {f.name for f in dataclasses.fields(cls)} | {cls.__name__}
    return {w for w in words if len(w) > 4 and ("_" in w or w[0].isupper())}


def test_no_dsv4_field_or_geometry_name_in_a_core_module() -> None:
    """A core module spells no DSV4 field, batch or geometry name as code (an identifier, an attribute, a string
    other than its docstrings): what it does for every family, it does without knowing DSV4's model."""
    vocabulary = _dsv4_vocabulary()
    assert {"swa_page_indices", "VerifyBatch", "verify_lens", "swa_window"} <= vocabulary
    found: dict[str, set[str]] = {}
    for path in _core_files():
        tree = ast.parse(path.read_text())
        docstrings = {id(node.value) for node in ast.walk(tree)  # a bare string: a docstring, an attribute's doc
                      if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
        words = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                words |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
        if words & vocabulary:
            found[str(path.relative_to(ROOT))] = words & vocabulary
    assert not found, found


def test_the_data_model_imports_no_builder() -> None:
    """The DSV4 family's batch package, tier.py and metadata.py know nothing of its builders or its reference."""
    modules = _modules()
    family = "metadata_builders.families.dsv4"
    model = [n for n in modules if _within(n, (f"{family}.batch",))]
    assert len(model) > 1, model
    builders = ("metadata_builders.families.dsv4.builders", f"{family}.hip", f"{family}.sglang", f"{family}.reference")
    for name in (*model, f"{family}.tier", f"{family}.metadata"):
        imported = _imports(name, modules[name], set(modules))
        assert not {t for t in imported if _within(t, builders)}, name


def _functions() -> list[tuple[str, int, int]]:
    out = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((f"{name}.{node.name}", node.lineno, node.end_lineno - node.lineno + 1))
    return out


def test_no_function_is_over_80_lines() -> None:
    """Every function reads on one screen; data tables are module-level constants, not functions."""
    long = [(f, n) for f, _, n in _functions() if n > MAX_FUNCTION_LINES]
    assert not long, long


_SPLIT_IN_PROGRESS: frozenset[str] = frozenset()
"""Rooms being split right now (issue 17): a module in one of these, or below it, is not yet held
to :data:`MAX_MODULE_LINES`.  When the splits land this becomes ``frozenset()`` and every module is."""


def long_modules(max_lines: int = MAX_MODULE_LINES) -> dict[str, int]:
    """Every module of ``metadata_builders/`` and ``strategies/`` over ``max_lines`` lines, with its length."""
    lengths = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    return {name: n for name, n in lengths.items() if n > max_lines}


def _in_progress(name: str) -> bool:
    return any(name == room or name.startswith(room + ".") for room in _SPLIT_IN_PROGRESS)


def test_no_module_is_over_500_lines() -> None:
    """Every room holds one concept and reads in one sitting: no module passes 500 lines.

    A concept that grows gets a module in its package, not a longer file (STYLE.md 12).
    """
    long = {name: n for name, n in long_modules().items() if not _in_progress(name)}
    assert not long, long


TESTS = ROOT / "tests"


def _test_files() -> list[pathlib.Path]:
    """Every test module (``test_*.py``), test helper module (``_*.py``) and ``conftest.py`` under ``tests/``."""
    return sorted(p for p in TESTS.rglob("*.py") if p.name.startswith(("test_", "_")) or p.name == "conftest.py")


def test_no_test_module_is_over_500_lines() -> None:
    """The tests read in one sitting too: no test module, helper module or conftest.py passes 500 lines."""
    lengths = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in _test_files()}
    long = {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES}
    assert not long, long


def _test_modules_imported(source: str) -> list[str]:
    """The test modules (a dotted part ``test_*``) that ``source`` imports: ``import test_x``, ``from test_x import
    ...``, ``from tests.dsv4.test_x import ...``, ``from tests.dsv4 import test_x``, ``from . import test_x``."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names += [f"{node.module or ''}.{alias.name}".lstrip(".") for alias in node.names]
    return sorted(name for name in names if any(part.startswith("test_") for part in name.split(".")))


@pytest.mark.parametrize("source", ["import test_batch", "from test_batch import RAGGED",
                                    "from tests.dsv4.test_batch import RAGGED", "from tests.dsv4 import test_batch",
                                    "from . import test_batch"])
def test_an_import_of_a_test_module_is_seen(source: str) -> None:
    assert _test_modules_imported(source) != []


def test_no_test_module_imports_another() -> None:
    """A helper two test modules share lives in a helper module (``tests/_*.py``) or, a fixture, in conftest.py;
    no module under ``tests/`` imports a test module (the soundness test's ``tests.regressions.soundness.generate``
    is a generator script, not a test module)."""
    bad = {str(path.relative_to(ROOT)): found for path in _test_files()
           if (found := _test_modules_imported(path.read_text()))}
    assert not bad, bad


ERRORS = [cls for module in (errors, dsv4_errors) for _, cls in inspect.getmembers(module, inspect.isclass)
          if issubclass(cls, errors.MetadataBuildersError) and cls.__module__ == module.__name__]

SAMPLES = {
    errors.InvalidBatch: ("verify_lens", 2, "in 1..num_draft_tokens=3", 0),
    errors.InvalidVariant: ("gate", "one of [...]", "bogus"),
    errors.InvalidMetadata: ("fields", "every FIELD_NAMES entry", "missing ['swa_loc']"),
    errors.StreamOutOfBounds: ("hca_indices", 3, (40, 52), 48),
    errors.UsageError: ("--only", "choose from [...]", "unknown ['x']"),
    errors.BuilderNotFound: ("nosuch", "expected module:attr"),
    errors.UnknownMutant: ("nosuch", ("a", "b")),
    dsv4_errors.StaleMirror: (2, 7, 4),
    errors.CaptureMismatch: ("seq_lens", (4,), (5,)),
    errors.CaptureSync: ("Tensor.item", "in_graph", "scalar", ("seq_lens",)),
    errors.MutantDoesNotApply: ("m", "core_metadata", 0),
    errors.GateError: ("git rev-parse", "unknown revision"),
    errors.UpstreamNotFound: ("is_unified_kv_triton", "0.5.24", ("a (missing)", "b (missing)")),
    errors.PlotExtraMissing: ("the PNG picture",),
    errors.DeviceUnavailable: ("--device", "cuda", "torch.cuda.is_available() is False"),
    errors.BuilderContractError: ("mypkg:B", "build(inputs)", "a VerifyMetadata", "dict", "wrap the fields"),
    errors.InvalidDeclaration: ("mypkg:B", "B", "modes", "a non-empty tuple of mode names", "()", "declare one"),
    errors.ModeNotBuilt: ("spec_v3", ("target_verify", "draft_extend")),
}


@pytest.mark.parametrize("cls", ERRORS, ids=[c.__name__ for c in ERRORS])
def test_every_error_round_trips_through_pickle(cls: type) -> None:
    """Raised in a worker process, an error arrives whole: same class, message and data."""
    if cls is errors.MetadataBuildersError:
        error = cls("a message")
    elif cls is errors.PropertyFailure:
        error = cls("P1", "fields differ", variant="eager/x", field="swa_loc", index=(3,), expected=1, actual=2,
                    check="p1.field_differs", origin=errors.Origin("ValueError", "x.py", 3, "build"))
    else:
        error = cls(*SAMPLES[cls])
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls and str(again) == str(error)
    assert (again.field, again.index, again.expected, again.actual) == (error.field, error.index, error.expected,
                                                                       error.actual)
    assert isinstance(again, errors.MetadataBuildersError) and isinstance(again, cls.__mro__[-3])


def _importers(rooms: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module of ``rooms`` (a room and everything below it) -> the harness modules it imports."""
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()
            if any(name == room or name.startswith(room + ".") for room in rooms)}


def _within(name: str, rooms: tuple[str, ...]) -> bool:
    return any(name == room or name.startswith(room + ".") for room in rooms)


DSV4 = "metadata_builders.families.dsv4"
BUILDER_ROOMS = (f"{DSV4}.builders", f"{DSV4}.hip", f"{DSV4}.sglang", f"{DSV4}.reference", "metadata_builders.builders")
PROPERTY_ROOMS = (f"{DSV4}.properties", "metadata_builders.properties")
ABOVE_PROPERTIES = (f"{DSV4}.runs", f"{DSV4}.render", f"{DSV4}.gate", f"{DSV4}.__main__", f"{DSV4}.tools",
                    f"{DSV4}.mutants", "metadata_builders.runs", "metadata_builders.gate", "metadata_builders.cli",
                    "metadata_builders.tools", "metadata_builders.plugin")
TOOLS = (f"{DSV4}.tools", f"{DSV4}.mutants", "metadata_builders.tools")
REMOVED = ("hip", "hip_compression", "hip_low_ratios", "hip_streams", "audit_triton", "launch_memo", "inputs",
           "graph_recorder", "check_runs", "runner", "reproduce", "report", "findings", "profiles", "sglang_adapter",
           "routes", "batch", "reference", "metadata", "variants", "tier", "kv_state", "render")
"""The hall's names of 0.3 that are gone: 0.2's aliases (removed in 0.4) and the DSV4 family's model, reference and
builders, and its pictures (moved to ``metadata_builders.families.dsv4``; CHANGELOG.md)."""


def test_the_top_level_shows_the_roles() -> None:
    """The hall holds the core's rooms and the family packages, nothing else: no alias module, no family's model."""
    roles = {
        "model": {"errors", "devices", "records", "values", "session", "worktrees"},
        "families": {"families"},
        "builders": {"builders"},
        "harness": {"harness", "audit"},
        "properties": {"properties"},
        "runs": {"runs"},
        "interfaces": {"cli", "plugin", "gate", "tools"},
    }
    known = {room for rooms in roles.values() for room in rooms} | {"__init__"}
    here = {p.stem if p.is_file() else p.name for p in (ROOT / "metadata_builders").iterdir()
            if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert here <= known, sorted(here - known)
    assert not here & set(REMOVED), sorted(here & set(REMOVED))
    aliases = [str(path.relative_to(ROOT)) for path in _modules().values()
               if "sys.modules[__name__]" in path.read_text()]
    assert not aliases, f"alias modules: {aliases}"


@pytest.mark.parametrize(("rooms", "forbidden", "rule"), [
    (BUILDER_ROOMS, (*PROPERTY_ROOMS, *ABOVE_PROPERTIES), "builders import no property, run or interface"),
    (PROPERTY_ROOMS, ABOVE_PROPERTIES, "properties import no report, run or interface"),
])
def test_the_layers_run_one_way(rooms, forbidden, rule) -> None:
    """docs/ARCHITECTURE.md's layers, in the core and in the DSV4 family alike: model -> builders -> harness ->
    properties -> runs -> interfaces."""
    bad = {name: sorted(t for t in imported if _within(t, forbidden))
           for name, imported in _importers(rooms).items()}
    bad = {name: targets for name, targets in bad.items() if targets}
    assert not bad, f"{rule}: {bad}"


def test_only_the_cli_imports_the_tools() -> None:
    """The tools (mutants, power, bench, shard) measure the harness; nothing but the command lines (and the tools)
    reaches them."""
    bad = {name: sorted(t for t in imported if _within(t, TOOLS))
           for name, imported in _importers(("metadata_builders", "strategies")).items()
           if not _within(name, (*TOOLS, f"{DSV4}.__main__", "metadata_builders.cli"))}
    assert not {n: t for n, t in bad.items() if t}
