"""What each torch call is to the audit, and whether its arguments can be vouched for without the dispatcher.

Watching every aten op from a ``TorchDispatchMode`` costs about 10 µs an op,
more than the op itself on a builder's small tensors.  So the audit watches
every *call* from a ``TorchFunctionMode`` (about 2 µs) and pushes its dispatch
layer only around the calls the function level cannot vouch for
(:mod:`.function_level`).  This module sorts calls, once per function, into
kinds, and scans one call's arguments.

A call's **operand slots** are the leading positional arguments torch takes as
tensors: a device tensor there is computed with, never read.  Anywhere else a
device tensor stands where torch wants a number, which torch reads back
(``x.expand(t.sum())``, ``torch.arange(t.sum())``, ``x.sum(dim=t)``).  Worked
example, ``t`` a device tensor, ``h`` a host one::

    torch.where(m, t, 0)      where: 3 slots      operands m, t -> vouched for
    t.clamp(min=t.min())      clamp: min, max     a tensor keyword -> vouched for
    t.expand(t.sum())         expand: 1 slot      a device tensor past it -> the dispatcher
    h.sum(dim=t)              sum: 1 slot         a device tensor in a keyword -> the dispatcher
    h + 1                     add: 2 slots        host only, plain -> bare
    torch.zeros(Sizer())      a factory           an object that may run code -> the dispatcher
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import torch

from metadata_builders.audit.residency import _PROVENANCE, _UNPLACED, is_device_resident

__all__: list[str] = []

_DEVICE_ATTR = torch.Tensor.device

_TENSOR, _PARAMETER = torch.Tensor, torch.nn.Parameter
TENSORS = frozenset({_TENSOR, _PARAMETER})
"""Tensor types the function level handles itself; a subclass may run code of its own: the dispatcher."""

PLAIN = frozenset(
    {int, float, bool, complex, str, type(None), type(...), torch.dtype, torch.device, torch.layout,
     torch.memory_format}
)
"""Argument types that hold no tensor and run no code of their own."""

VIEW_INDICES = frozenset({int, bool, type(None), type(...)})
"""What ``x[...]`` takes besides slices to make a view: no tensor, nothing to gather."""
SLICE_BOUNDS = frozenset({int, type(None)})
INDEX_DTYPES = frozenset({torch.int64, torch.int32, torch.int16, torch.int8})
"""Index tensor dtypes that gather (``uint8`` and ``bool`` are masks: a data-dependent shape)."""

FACTORIES = frozenset(
    {"tensor", "as_tensor", "arange", "zeros", "ones", "full", "empty", "empty_strided", "randint", "rand",
     "randn", "linspace", "eye", "from_numpy", "range", "zeros_like", "ones_like", "full_like", "empty_like"}
)
LIKE = frozenset({"zeros_like", "ones_like", "full_like", "empty_like"})
"""Factories whose first argument only lends a shape: device memory that reads nothing."""
HOST_RESULTS = frozenset({"cpu", "numpy", "tolist", "__array__", "__repr__", "__format__", "__str__"})
SCALAR_READS = frozenset({"item", "__int__", "__float__", "__bool__", "__index__", "__complex__"})

_BINARY = (
    "add sub mul div true_divide floor_divide remainder fmod pow rsub lt le gt ge eq ne maximum minimum fmax fmin "
    "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift logical_and logical_or logical_xor "
    "__add__ __radd__ __sub__ __mul__ __rmul__ __truediv__ __mod__ __pow__ __and__ __rand__ __or__ __ror__ "
    "__xor__ __rxor__ __lshift__ __rshift__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ "
    "__rsub__ __rdiv__ __rtruediv__ __rmod__ __rpow__ __floordiv__ __rfloordiv__ __rlshift__ __rrshift__"
)
_UNARY = (
    "neg negative abs absolute positive sign logical_not bitwise_not __neg__ __pos__ __abs__ __invert__ "
    "clone detach contiguous long int float double bool short half byte char "
    "unsqueeze squeeze view reshape flatten permute transpose t expand narrow flip roll repeat "
    "cumsum cumprod sum prod mean amax amin max min argmax argmin any all aminmax sort argsort "
    "floor ceil round trunc pad "
    "dim size stride numel nelement element_size is_contiguous is_floating_point data_ptr storage_offset "
    "get_device ndimension __len__"
)
_OPERANDS: dict[str, int] = {
    **dict.fromkeys(_UNARY.split(), 1), **dict.fromkeys(_BINARY.split(), 2),
    "where": 3, "masked_fill": 3, "clamp": 3, "clip": 3, "searchsorted": 2, "cat": 1, "concat": 1, "stack": 1,
    "new_empty": 1, "new_zeros": 1, "new_ones": 1, "new_full": 1,
}
"""Functions that compute on their operands only: no read, no data-dependent shape, no write, no gather."""
_OPERAND_KWARGS = {"clamp": frozenset({"min", "max"}), "clip": frozenset({"min", "max"}),
                   "searchsorted": frozenset({"sorter"})}
_MIN_ARGS = {"where": 3}  # torch.where(mask) alone is nonzero: a data-dependent shape
_NEW = frozenset({"new_empty", "new_zeros", "new_ones", "new_full"})
_PYTHON_OPERATORS = frozenset(
    {"Tensor.__rsub__", "Tensor.__rdiv__", "Tensor.__rmod__", "Tensor.__rpow__", "Tensor.__floordiv__",
     "Tensor.__rfloordiv__", "Tensor.__rlshift__", "Tensor.__rrshift__", "Tensor.__len__"}
)
"""Python-level ``Tensor`` methods whose body is one operator on the same operands (torch/_tensor.py)."""
_VIEW_GETTERS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})
_META_GETTERS = frozenset(
    {"shape", "dtype", "ndim", "layout", "is_cpu", "is_cuda", "is_meta", "is_sparse", "is_quantized", "is_mkldnn",
     "is_nested", "requires_grad", "is_leaf", "itemsize", "nbytes", "names", "grad_fn", "_base", "grad",
     "output_nr", "_version"}
)
_IN_PLACE: dict[str, int] = {
    **dict.fromkeys("add_ sub_ mul_ div_ remainder_ bitwise_and_ bitwise_or_ bitwise_xor_".split(), 2),
    "zero_": 1, "fill_": 2, "clamp_": 3, "masked_fill_": 3, "scatter_": 4,
}
"""In-place writes by their operands: they read nothing, and the target now holds what its operands read."""
_NUMBERS = {"scatter_": frozenset({1})}
"""Positions of an in-place write that take a number (``scatter_(dim, index, src)``)."""
_IN_PLACE_DUNDERS = frozenset(
    {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__idiv__", "__ifloordiv__", "__imod__", "__ipow__",
     "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "__setitem__",
     "__delitem__", "__set__"}
)
_PAD = torch.nn.functional.pad
_BUILTINS = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)


class Kind(NamedTuple):
    """What a function is to the audit: its kind, its name, its operand slots and keywords."""

    kind: int
    name: str
    slots: int = 0
    operand_kwargs: frozenset[str] = frozenset()
    min_args: int = 0
    reads_none: bool = False
    """The result is fresh device memory that depends on no input (``new_zeros``)."""
    numbers: frozenset[int] = frozenset()
    """Positions within ``slots`` that must hold a plain int (``scatter_``'s ``dim``)."""


(DEVICE_GETTER, META, VIEW_GETTER, HOST_RESULT, SCALAR_READ, FACTORY, TO, GETITEM, GATHER, REPEAT, PAD,
 OPERANDS, IN_PLACE, SETITEM, BUILTIN, OPAQUE) = range(16)

_KINDS: dict[Callable, Kind] = {}


def kind_of(func: Callable) -> Kind:
    """The :class:`Kind` of ``func`` (sorted once per function, by its name and whether it is built in)."""
    kind = _KINDS.get(func)
    if kind is None:
        kind = _KINDS[func] = _sort(func)
    return kind


def _sort(func: Callable) -> Kind:
    name = getattr(func, "__name__", "")
    if name == "__get__" and isinstance(func, types.MethodWrapperType):
        owner = getattr(func, "__self__", None)
        attr = getattr(owner, "__name__", "")
        if owner is _DEVICE_ATTR:
            return Kind(DEVICE_GETTER, attr)
        if attr in _VIEW_GETTERS:
            return Kind(VIEW_GETTER, attr)
        return Kind(META if attr in _META_GETTERS else OPAQUE, attr)
    # The three the audit always treated by name alone: they decide where memory goes.
    if name in HOST_RESULTS:
        return Kind(HOST_RESULT, name)
    if name in FACTORIES:
        return Kind(FACTORY, name, 1 if name in LIKE else 0)
    if name == "to":
        return Kind(TO, name, 2)
    if func is torch.device:  # names a device; reads nothing
        return Kind(META, "device")
    if func is _PAD:  # Python-level, but only torch._C._nn.pad inside for mode="constant"
        return Kind(PAD, name, 1)
    builtin = isinstance(func, _BUILTINS)
    if not builtin and getattr(func, "__qualname__", "") not in _PYTHON_OPERATORS:
        return Kind(OPAQUE, name)  # torch.ops, Python-level torch functions: their insides are unseen here
    if name in SCALAR_READS:
        return Kind(SCALAR_READ, name, 1)
    if name == "__getitem__":
        return Kind(GETITEM, name)
    if name in ("index_select", "gather"):
        return Kind(GATHER, name, 3)
    if name == "repeat_interleave":
        return Kind(REPEAT, name, 2)
    if name in _OPERANDS:
        return Kind(OPERANDS, name, _OPERANDS[name], _OPERAND_KWARGS.get(name, frozenset()),
                    _MIN_ARGS.get(name, 0), name in _NEW)
    if name in _IN_PLACE:
        return Kind(IN_PLACE, name, _IN_PLACE[name], _OPERAND_KWARGS.get(name.rstrip("_"), frozenset()),
                    numbers=_NUMBERS.get(name, frozenset()))
    if name == "__setitem__":
        return Kind(SETITEM, name)
    in_place = name in _IN_PLACE_DUNDERS or (name.endswith("_") and not name.endswith("__"))
    return Kind(OPAQUE if in_place else BUILTIN, name)


def scan(args: tuple, kwargs: dict, slots: int = 0,
         operand_kwargs: frozenset[str] = frozenset()) -> tuple[list[torch.Tensor], bool] | None:
    """The tensors among a call's arguments, and whether one is device memory.

    None when the call needs the dispatcher: a device tensor past the first
    ``slots`` positional arguments or in a keyword other than ``operand_kwargs``,
    an ``out=`` or ``inplace=`` keyword (a write), or an argument of a type that
    could hold a tensor or run code of its own.
    """
    tensors: list[torch.Tensor] = []
    resident = False
    position = 0
    for value in args:
        kind = type(value)
        if kind is _TENSOR or kind is _PARAMETER:
            if getattr(value, _PROVENANCE, _UNPLACED)[0] if value.is_cpu else not value.is_meta:
                if position >= slots:
                    return None
                resident = True
            tensors.append(value)
        elif kind not in PLAIN:
            found = _nested(value, tensors, position < slots)
            if found is None:
                return None
            resident = resident or found
        position += 1
    if kwargs:
        for key, value in kwargs.items():
            if key == "out" or key == "inplace":
                return None
            found = _nested(value, tensors, key in operand_kwargs)
            if found is None:
                return None
            resident = resident or found
    return tensors, resident


def _nested(value: Any, tensors: list[torch.Tensor], operand: bool) -> bool | None:
    """Collect the tensors in ``value``; whether one is device memory, None when it cannot be vouched for."""
    kind = type(value)
    if kind in PLAIN:
        return False
    if kind in TENSORS:
        resident = is_device_resident(value)
        if resident and not operand:
            return None
        tensors.append(value)
        return resident
    if kind is list or kind is tuple or kind is torch.Size:
        if PLAIN.issuperset(map(type, value)):
            return False  # the common case, a shape or a list of numbers, checked at C speed
        resident = False
        for item in value:
            found = _nested(item, tensors, operand)
            if found is None:
                return None
            resident = resident or found
        return resident
    if kind is slice:
        return _nested((value.start, value.stop, value.step), tensors, False)
    return None


@dataclass(slots=True)
class _Call:
    """The Python-level torch call being handled (the spelling a record names)."""

    func: Callable
    recorded: bool = False


def _resident(t: Any) -> bool:
    """:func:`~.residency.is_device_resident` for a tensor of the types this module vouches for."""
    return getattr(t, _PROVENANCE, _UNPLACED)[0] if t.is_cpu else not t.is_meta


def _plain_slice(part: slice) -> bool:
    """A slice of ints and Nones: a view; a tensor bound is read (``x[:t.sum()]``), an object's ``__index__`` runs."""
    return type(part.start) in SLICE_BOUNDS and type(part.stop) in SLICE_BOUNDS and type(part.step) in SLICE_BOUNDS
