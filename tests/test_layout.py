"""The house: a layout a newcomer can live in.

No import circle among the harness's modules, no module or function too long to read,
one exception tree whose every member survives a trip between processes.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import pickle

import pytest

import metadata_builders.errors as errors

ROOT = pathlib.Path(__file__).resolve().parent.parent
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


CORE_NAMING_A_FAMILY = frozenset({
    "metadata_builders/__init__.py",
    "metadata_builders/builders/audited.py",
    "metadata_builders/builders/capabilities.py",
    "metadata_builders/builders/contract.py",
    "metadata_builders/builders/registry.py",
    "metadata_builders/cli.py",
    "metadata_builders/gate/command.py",
    "metadata_builders/gate/corpus.py",
    "metadata_builders/gate/evaluate.py",
    "metadata_builders/gate/isolation.py",
    "metadata_builders/gate/replays.py",
    "metadata_builders/gate/shrink.py",
    "metadata_builders/gate/verdicts.py",
    "metadata_builders/harness/graph_recorder.py",
    "metadata_builders/harness/graph_runner.py",
    "metadata_builders/harness/inputs.py",
    "metadata_builders/properties/_common.py",
    "metadata_builders/properties/equality.py",
    "metadata_builders/properties/faults.py",
    "metadata_builders/properties/graph.py",
    "metadata_builders/properties/kv.py",
    "metadata_builders/properties/kv_paged.py",
    "metadata_builders/properties/mirror.py",
    "metadata_builders/properties/runner.py",
    "metadata_builders/properties/sequences.py",
    "metadata_builders/properties/spec.py",
    "metadata_builders/properties/state.py",
    "metadata_builders/properties/syncs.py",
    "metadata_builders/records.py",
    "metadata_builders/render/analysis.py",
    "metadata_builders/render/differences.py",
    "metadata_builders/render/files.py",
    "metadata_builders/render/html.py",
    "metadata_builders/render/model.py",
    "metadata_builders/render/png.py",
    "metadata_builders/runs/check.py",
    "metadata_builders/runs/check_report.py",
    "metadata_builders/runs/check_runs.py",
    "metadata_builders/runs/findings.py",
    "metadata_builders/runs/report.py",
    "metadata_builders/runs/reproduce.py",
    "metadata_builders/runs/runner.py",
    "metadata_builders/tools/bench.py",
    "metadata_builders/tools/mutants/catalogue.py",
    "metadata_builders/tools/mutants/groups.py",
    "metadata_builders/tools/mutants/modes.py",
    "metadata_builders/tools/mutants/patching.py",
    "metadata_builders/tools/mutants/runner.py",
    "metadata_builders/tools/mutants/spec.py",
    "metadata_builders/tools/power/baseline.py",
    "metadata_builders/tools/power/runs.py",
    "strategies/_arguments.py",
    "strategies/_batches.py",
    "strategies/_coverage.py",
    "strategies/_divergences.py",
    "strategies/_geometry.py",
    "strategies/_modes.py",
    "strategies/_workers.py",
})
"""Core modules that still import a family (DESIGN.md section 4.7, "The seam, as built"): a ratchet. A core module
not listed that names a family fails; a listed one that no longer does must leave the list, so it only shrinks."""


def test_the_core_names_no_family_but_the_listed_ones() -> None:
    """The core takes a family's pieces through the family's package; new core code names no family."""
    naming = set()
    for path in [*(ROOT / "metadata_builders").rglob("*.py"), *(ROOT / "strategies").rglob("*.py")]:
        rel = str(path.relative_to(ROOT))
        if not rel.startswith("metadata_builders/families/") and "metadata_builders.families." in path.read_text():
            naming.add(rel)
    assert not naming - CORE_NAMING_A_FAMILY, \
        f"core modules that now name a family: {sorted(naming - CORE_NAMING_A_FAMILY)}"
    assert not CORE_NAMING_A_FAMILY - naming, f"no longer name one (drop them): {sorted(CORE_NAMING_A_FAMILY - naming)}"


def test_the_data_model_imports_no_builder() -> None:
    """The DSV4 family's batch package, tier.py and metadata.py know nothing of its builders or its reference."""
    modules = _modules()
    family = "metadata_builders.families.dsv4"
    model = [n for n in modules if _within(n, (f"{family}.batch",))]
    assert len(model) > 1, model
    builders = ("metadata_builders.builders", f"{family}.hip", f"{family}.sglang", f"{family}.reference")
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


ERRORS = [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
          if issubclass(cls, errors.MetadataBuildersError)]

SAMPLES = {
    errors.InvalidBatch: ("verify_lens", 2, "in 1..num_draft_tokens=3", 0),
    errors.InvalidVariant: ("gate", "one of [...]", "bogus"),
    errors.InvalidMetadata: ("fields", "every FIELD_NAMES entry", "missing ['swa_loc']"),
    errors.StreamOutOfBounds: ("hca_indices", 3, (40, 52), 48),
    errors.UsageError: ("--only", "choose from [...]", "unknown ['x']"),
    errors.BuilderNotFound: ("nosuch", "expected module:attr"),
    errors.UnknownMutant: ("nosuch", ("a", "b")),
    errors.StaleMirror: (2, 7, 4),
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


BUILDER_ROOMS = ("metadata_builders.builders", "metadata_builders.families")
ABOVE_PROPERTIES = ("metadata_builders.runs", "metadata_builders.render", "metadata_builders.gate",
                    "metadata_builders.cli", "metadata_builders.tools", "metadata_builders.plugin")
REMOVED = ("hip", "hip_compression", "hip_low_ratios", "hip_streams", "audit_triton", "launch_memo", "inputs",
           "graph_recorder", "check_runs", "runner", "reproduce", "report", "findings", "profiles", "sglang_adapter",
           "routes", "batch", "reference", "metadata", "variants", "tier", "kv_state")
"""The hall's names of 0.3 that are gone: 0.2's aliases (removed in 0.4) and the DSV4 family's model, reference and
builders (moved to ``metadata_builders.families.dsv4``; CHANGELOG.md)."""


def test_the_top_level_shows_the_roles() -> None:
    """The hall holds the core's rooms and the family packages, nothing else: no alias module, no family's model."""
    roles = {
        "model": {"errors", "devices", "records", "values", "session", "worktrees"},
        "families": {"families"},
        "builders": {"builders"},
        "harness": {"harness", "audit"},
        "properties": {"properties"},
        "runs": {"runs"},
        "interfaces": {"cli", "plugin", "gate", "render", "tools"},
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
    (BUILDER_ROOMS, ("metadata_builders.properties", *ABOVE_PROPERTIES),
     "builders import no property, run or interface"),
    (("metadata_builders.properties",), ABOVE_PROPERTIES, "properties import no report, run or interface"),
])
def test_the_layers_run_one_way(rooms, forbidden, rule) -> None:
    """docs/ARCHITECTURE.md's layers: model -> builders -> harness -> properties -> runs -> interfaces."""
    bad = {name: sorted(t for t in imported if _within(t, forbidden))
           for name, imported in _importers(rooms).items()}
    bad = {name: targets for name, targets in bad.items() if targets}
    assert not bad, f"{rule}: {bad}"


def test_only_the_cli_imports_the_tools() -> None:
    """The tools (mutants, power, bench) measure the harness; nothing but the CLI (and the tools) reaches them."""
    bad = {name: sorted(t for t in imported if _within(t, ("metadata_builders.tools",)))
           for name, imported in _importers(("metadata_builders", "strategies")).items()
           if not _within(name, ("metadata_builders.tools", "metadata_builders.cli"))}
    assert not {n: t for n, t in bad.items() if t}
