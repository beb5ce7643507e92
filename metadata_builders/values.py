"""The value checks every family's batch model shares: ints, lists of ints, known keys.

Each raises :class:`~metadata_builders.errors.InvalidBatch` naming the field,
the index and the value, e.g. ``verify_lens[2]: expected an int, got '3'``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from metadata_builders.errors import InvalidBatch

__all__ = ["check_int", "int_tuple", "reject_unknown"]


def check_int(name: str, value: Any, index: int | None = None, *, minimum: int | None = None) -> int:
    """``value`` itself, if it is an int (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidBatch(name, index, "an int", value)
    if minimum is not None and value < minimum:
        raise InvalidBatch(name, index, f">= {minimum}", value)
    return value


def int_tuple(name: str, values: Any, *, minimum: int | None = None) -> tuple[int, ...]:
    """``values`` as a tuple of ints of at least ``minimum`` each; an error names the first bad index."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise InvalidBatch(name, None, "a list of ints", values)
    out = tuple(values)
    # Fast path (tables hold thousands of entries): plain ints all, none below the minimum.
    if set(map(type, out)) <= {int} and (minimum is None or not out or min(out) >= minimum):
        return out
    return tuple(check_int(name, v, i, minimum=minimum) for i, v in enumerate(out))



def reject_unknown(where: str, d: Any, known: set[str]) -> None:
    """``d`` is a mapping whose every key is in ``known`` (a typo in a replay file is an error, not a default)."""
    if not isinstance(d, Mapping):
        raise InvalidBatch(where, None, "an object", d)
    for key in d:
        if key not in known:
            field_name = key if where == "batch" else f"{where}.{key}"
            raise InvalidBatch(field_name, None, f"one of {sorted(known)}", "unknown key")
