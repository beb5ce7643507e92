"""Turning a catalogue entry into a builder: edit the stage's source, compile it, patch it in.

:func:`mutated_source` applies a mutant's ``find`` -> ``replace`` to the source
text of its stage and raises :class:`~metadata_builders.errors.MutantDoesNotApply`
when the text is not there exactly once (``hip.py`` changed), so a stale mutant
fails loudly instead of silently testing nothing.  :class:`MutantBuilder`
compiles the edited copy once in ``hip``'s namespace and, for the duration of
each ``build`` and each graph phase (``graph_state`` / ``out_graph`` / ``in_graph``), puts it in place of the original
in the ``hip`` module, so the rest of the pipeline calls the mutated stage exactly
as it would call a buggy upstream one.  Nothing edits outputs after the fact.

Every mutant is also a ``module:attr`` factory (:data:`FACTORIES`, exported by
the package)::

    metadata-builders check --builder metadata_builders.families.dsv4.mutants:dropped_dspark_gate

Importing this module does not import torch: ``hip`` is imported when a mutant
is first compiled, and :class:`MutantBuilder` (a ``HipBuilder`` subclass) is
created on first access.
"""

from __future__ import annotations
import __future__

import functools
import inspect
import linecache
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from metadata_builders.errors import MutantDoesNotApply, UnknownMutant
from metadata_builders.families.dsv4.mutants.catalogue import MUTANTS, MutantSpec

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.builders import AuditedBuilder
    from metadata_builders.families.dsv4.hip import GraphState
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.metadata import Decision, VerifyMetadata

__all__ = [
    "FACTORIES",
    "MutantBuilder",  # noqa: F822 - created on first access (module __getattr__), so import stays torch-free
    "mutant_builder",
    "mutant_builder_class",
    "mutated_source",
]

_PACKAGE = "metadata_builders.families.dsv4.mutants"
"""Where the factories and ``MutantBuilder`` are public (their ``__module__``, so they pickle by that name)."""


def _stage_module(stage: str) -> tuple[Any, str]:
    """The module that defines ``stage`` and the function's name there.

    ``compression.<fn>`` names a function of :mod:`metadata_builders.families.dsv4.hip.compression`
    (the compression groups), ``low_ratios.<fn>`` one of :mod:`metadata_builders.families.dsv4.hip.low_ratios`,
    ``decode.<fn>`` one of :mod:`metadata_builders.families.dsv4.hip.decode` (the decode modes); ``HipBuilder.<method>``
    and the entry points (``target_verify``, ``draft_extend``) :mod:`metadata_builders.families.dsv4.hip.builder`'s;
    anything else is a function of :mod:`metadata_builders.families.dsv4.hip.pipeline`.
    """
    if stage.startswith("compression."):
        from metadata_builders.families.dsv4.hip import compression as hip_compression

        return hip_compression, stage.partition(".")[2]
    if stage.startswith("low_ratios."):
        from metadata_builders.families.dsv4.hip import low_ratios as hip_low_ratios

        return hip_low_ratios, stage.partition(".")[2]
    if stage.startswith("decode."):
        from metadata_builders.families.dsv4.hip import decode as hip_decode

        return hip_decode, stage.partition(".")[2]
    if stage.startswith("HipBuilder.") or stage in _BUILDER_STAGES:
        from metadata_builders.families.dsv4.hip import builder

        return builder, stage
    from metadata_builders.families.dsv4.hip import pipeline as hip

    return hip, stage


_BUILDER_STAGES = ("target_verify", "draft_extend", "_captured_tiers")
"""The entry points, which live in :mod:`metadata_builders.families.dsv4.hip.builder` with ``HipBuilder``."""


def _original_stage(stage: str) -> Callable[..., Any]:
    """The pristine function of ``stage`` (never a mutant left in place)."""
    from metadata_builders.families.dsv4.hip.builder import HipBuilder

    if stage.startswith("HipBuilder."):
        return getattr(HipBuilder, stage.partition(".")[2])
    module, name = _stage_module(stage)
    fn = getattr(module, name)
    return getattr(fn, "__mutant_original__", fn)


def mutated_source(spec: MutantSpec) -> str:
    """The mutated stage's source text, dedented; raises :class:`MutantDoesNotApply` if the edit misses."""
    source = inspect.getsource(_original_stage(spec.stage))
    count = source.count(spec.find)
    if count != 1:
        raise MutantDoesNotApply(spec.name, spec.stage, count)
    return textwrap.dedent(source.replace(spec.find, spec.replace))


_COMPILED: dict[str, Callable[..., Any]] = {}


def _compile(spec: MutantSpec) -> Callable[..., Any]:
    """Compile the mutated stage in (a copy of) its module's namespace; cached per mutant.

    The source is registered with ``linecache`` so tracebacks and ``inspect``
    show the mutated line.
    """
    if spec.name in _COMPILED:
        return _COMPILED[spec.name]
    module, _ = _stage_module(spec.stage)
    source = mutated_source(spec)
    filename = f"<mutant {spec.name}: hip.{spec.stage}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace = dict(vars(module))
    exec(code, namespace)  # noqa: S102 - compiling our own edited copy of hip.py is the point
    fn = namespace[spec.stage.rpartition(".")[2]]
    fn.__mutant_original__ = _original_stage(spec.stage)
    _COMPILED[spec.name] = fn
    return fn


@functools.cache
def mutant_builder_class() -> type:
    """``MutantBuilder``, defined on first use (once) so importing this module does not import torch."""
    from metadata_builders.families.dsv4.hip import HipBuilder

    class _MutantBuilder(HipBuilder):
        """A :class:`~metadata_builders.families.dsv4.hip.pipeline.HipBuilder` with one stage replaced by a mutant.

        During each ``build`` and graph phase the mutated function stands in
        for the original in the ``hip`` module namespace (restored afterwards, even
        on error); a ``HipBuilder.<method>`` stage replaces that method instead.
        Keeps no state between builds, like the builder it mutates.
        """

        # It overrides the methods behind these, so it declares them again (a mutant is judged as ``hip`` is).
        graph_contract = "phases"
        mirror_validation = True
        capture_slots = True

        def __new__(cls, mutant: str | MutantSpec, *args: Any, **kwargs: Any) -> Any:
            # A mutant that declares a convention is an instance of a subclass declaring it (capabilities are
            # read from the class, never the instance).
            spec = MUTANTS[mutant] if isinstance(mutant, str) else mutant
            if spec.padding is not None and cls.__dict__.get("padding_convention") != spec.padding:
                cls = _declaring(cls, spec.padding)
            return super().__new__(cls)

        def __init__(self, mutant: str | MutantSpec, device: Any = "cpu", *, validate_mirror: bool = False) -> None:
            super().__init__(device, validate_mirror=validate_mirror)
            self.spec = MUTANTS[mutant] if isinstance(mutant, str) else mutant
            self.name = f"mutant:{self.spec.name}"
            self._mutated = _compile(self.spec)

        def with_mirror_validation(self) -> _MutantBuilder:
            return type(self)(self.spec, self.device, validate_mirror=True)

        def build(self, inputs: VerifyInputs) -> VerifyMetadata:
            return self._run("build", inputs)

        def graph_state(self, inputs: VerifyInputs) -> GraphState:
            return self._run("graph_state", inputs)

        def out_graph(self, state: GraphState, inputs: VerifyInputs) -> Decision:
            return self._run("out_graph", state, inputs)

        def in_graph(self, state: GraphState, inputs: VerifyInputs) -> dict[str, Any]:
            # Runs once, at capture: a replay re-executes what was recorded, whatever the stage.
            return self._run("in_graph", state, inputs)

        def _helper(self, method: str, *args: Any) -> Any:
            # A helper method of the phases: only its own mutant replaces it.
            if self.spec.stage == f"HipBuilder.{method}":
                return self._mutated(self, *args)
            return getattr(HipBuilder, method)(self, *args)

        def _run(self, method: str, *args: Any) -> Any:
            if self.spec.stage == f"HipBuilder.{method}":
                return self._mutated(self, *args)
            impl = getattr(HipBuilder, method)
            if self.spec.stage.startswith("HipBuilder."):
                return impl(self, *args)
            module, stage = _stage_module(self.spec.stage)
            original = vars(module)[stage]
            setattr(module, stage, self._mutated)
            try:
                return impl(self, *args)
            finally:
                setattr(module, stage, original)

    for method in _HELPERS:
        setattr(_MutantBuilder, method, _routed(method))
    _MutantBuilder.__name__ = _MutantBuilder.__qualname__ = "MutantBuilder"
    _MutantBuilder.__module__ = _PACKAGE
    return _MutantBuilder


_HELPERS = ("_new_state", "_draft_extend_out_graph", "_decode_out_graph", "verify_extension", "ragged_capture_slots")
"""``HipBuilder`` methods the phases call (``_new_state`` from ``graph_state`` and ``out_graph``, the out-graph helpers,
a stage method of ``Stages``, the runner's slot rule): only their own mutant replaces them."""


def _routed(method: str) -> Callable[..., Any]:
    def routed(self: Any, *args: Any) -> Any:
        return self._helper(method, *args)

    routed.__name__ = routed.__qualname__ = method
    return routed


@functools.cache
def _declaring(base: type, padding: str) -> type:
    """``base`` declaring ``padding`` (a mutant that changes the convention and says so)."""
    return type(base.__name__, (base,), {"padding_convention": padding, "__module__": base.__module__,
                                         "__qualname__": base.__qualname__})


def __getattr__(name: str) -> Any:
    # PEP 562: ``MutantBuilder`` is created on first access (it subclasses the torch builder).
    if name == "MutantBuilder":
        return mutant_builder_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def mutant_builder(name: str, device: str = "cpu") -> AuditedBuilder:
    """The audited builder for mutant ``name`` (what ``get_builder("metadata_builders.families.dsv4.mutants:<name>")``
    returns)."""
    from metadata_builders.families.dsv4.builders import AuditedBuilder, resolve_device

    if name not in MUTANTS:
        raise UnknownMutant(name, list(MUTANTS))
    device = resolve_device(device)
    factory = _MutantFactory(name)
    return AuditedBuilder(factory(device=device), device, f"mutants:{name}", factory=factory)


@dataclass(frozen=True)
class _MutantFactory:
    """Constructs mutant ``name``'s builder (picklable, so a fresh one can be made in a worker)."""

    name: str

    def __call__(self, device: str = "cpu") -> Any:
        return mutant_builder_class()(MUTANTS[self.name], device)


def _factory(spec: MutantSpec) -> Callable[..., AuditedBuilder]:
    """The ``module:attr`` factory of one mutant, documented with its spec (bug class, summary, diff)."""

    def factory(device: str = "cpu") -> AuditedBuilder:
        return mutant_builder(spec.name, device)

    factory.__name__ = factory.__qualname__ = spec.name
    factory.__module__ = _PACKAGE
    factory.__doc__ = spec.docstring
    return factory


FACTORIES: dict[str, Callable[..., AuditedBuilder]] = {name: _factory(spec) for name, spec in MUTANTS.items()}
"""One ``module:attr`` factory per mutant, by name; the package exports each as an attribute."""
