"""Turning a catalogue entry into a builder: edit the stage's source, compile it, put it in place during calls.

:func:`mutated_function` applies a mutant's ``find`` -> ``replace`` to its stage's source and raises
:class:`~metadata_builders.errors.MutantDoesNotApply` when the text is not there exactly once, so a stale mutant
fails loudly instead of testing nothing.  :func:`mutant_builder` returns a :class:`DSABuilder` subclass whose
every phase (``build``, ``graph_state``, ``out_graph``, ``in_graph``, ``kv_prelude``) runs with the edited
function in place of the original in its module: the rest of the builder calls it exactly as it would call a
buggy upstream stage (stages are called through their module's globals).  Nothing edits outputs afterwards.

Example::

    subject = DSASubject(mutant_builder("expand_no_floor"))
    check_p5_graph_vs_eager(subject, batch)      # dsa.p5.pad_negative on a draft-extend tier with a pad row
"""

from __future__ import annotations
import __future__

import contextlib
import functools
import importlib
import inspect
import textwrap
from collections.abc import Iterator
from typing import Any

from metadata_builders.errors import MutantDoesNotApply, UnknownMutant
from metadata_builders.families.dsa.mutants.catalogue import MUTANTS, DSAMutantSpec

__all__ = ["mutant_builder", "mutant_spec", "mutated_function", "patched"]

_BUILDER = "metadata_builders.families.dsa.builder"


def mutant_spec(name: str) -> DSAMutantSpec:
    """The catalogue entry called ``name`` (``UnknownMutant`` otherwise)."""
    for spec in MUTANTS:
        if spec.name == name:
            return spec
    raise UnknownMutant(name, [m.name for m in MUTANTS])


def _stage(spec: DSAMutantSpec) -> tuple[Any, str]:
    module_name, _, function = spec.stage.partition(".")
    return importlib.import_module(f"{_BUILDER}.{module_name}"), function


@functools.cache
def mutated_function(name: str) -> Any:
    """The mutant's stage, edited and compiled in its module's namespace (once per mutant)."""
    spec = mutant_spec(name)
    module, function = _stage(spec)
    source = textwrap.dedent(inspect.getsource(getattr(module, function)))
    count = source.count(spec.find)
    if count != 1:
        raise MutantDoesNotApply(name, spec.stage, count)
    code = compile(source.replace(spec.find, spec.replace), f"<mutant {name}: {spec.stage}>", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace = dict(vars(module))
    exec(code, namespace)  # the edited definition, with the module's globals  # noqa: S102
    return namespace[function]


@contextlib.contextmanager
def patched(name: str) -> Iterator[None]:
    """The mutant's stage in place of the original for the duration of the block."""
    spec = mutant_spec(name)
    module, function = _stage(spec)
    original, mutated = getattr(module, function), mutated_function(name)
    setattr(module, function, mutated)
    try:
        yield
    finally:
        setattr(module, function, original)


@functools.cache
def mutant_builder(name: str) -> type:
    """A :class:`~metadata_builders.families.dsa.builder.DSABuilder` with ``name``'s stage edited in every phase."""
    from metadata_builders.families.dsa.builder import DSABuilder

    mutated_function(name)  # a stale find text raises here, before any property runs
    phases = ("build", "graph_state", "out_graph", "in_graph", "kv_prelude")

    def wrap(method: Any) -> Any:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            with patched(name):
                return method(self, *args, **kwargs)
        return call

    body = {phase: wrap(getattr(DSABuilder, phase)) for phase in phases}
    body.update(name=f"dsa-torch+{name}", __doc__=f"The bundled DSA builder with mutant {name!r}.")
    return type(f"DSAMutant_{name}", (DSABuilder,), body)
