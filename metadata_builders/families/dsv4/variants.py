"""Paths and variant knobs: every way a builder may assemble the same metadata.

A :class:`Variant` picks one **path** (``eager``: exact, real requests only;
``graph``: the padded CUDA/HIP-graph tier) and three knobs.  Knobs that do not
apply to a batch are fixed at one documented value so that ``variants_for``
lists each distinct build exactly once:

========================  =========================================  ===============
batch                     knobs that vary                            fixed
========================  =========================================  ===============
eager, uniform            mirror (3) x gate (3)                      layout_total=host
eager, ragged             layout_total (2) x gate (3)                mirror=host
graph, uniform            mirror (3) x gate (3)                      layout_total=host
graph, ragged             gate (3)                                   mirror=host, layout_total=host
========================  =========================================  ===============

On the graph path the ragged total is not a knob: an uncapped tier carries its
host total (the tier), a capped tier reads the device sum (DESIGN.md section 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from metadata_builders.errors import InvalidVariant, ModeNotBuilt

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = [
    "BUILT_MODES",
    "Gate",
    "LayoutTotal",
    "Mirror",
    "Path",
    "Variant",
    "apply_gate",
    "check_variant",
    "divergence_applies",
    "variants_for",
]

Path = Literal["eager", "graph"]
Mirror = Literal["host", "device", "tolist"]
LayoutTotal = Literal["host", "device"]
Gate = Literal["dspark", "ungated", "always_sync"]

_GATES: tuple[Gate, ...] = get_args(Gate)
_MIRRORS: tuple[Mirror, ...] = get_args(Mirror)
_TOTALS: tuple[LayoutTotal, ...] = get_args(LayoutTotal)


@dataclass(frozen=True, slots=True)
class Variant:
    """One build recipe. All variants of a batch must give identical metadata."""

    path: Path = "eager"
    """``eager`` (exact: real requests only) or ``graph`` (padded tier)."""
    mirror: Mirror = "host"
    """Uniform batches: host mirror passed / uniform lengths built on device / ``seq_lens.tolist()``."""
    layout_total: LayoutTotal = "host"
    """Eager ragged batches: total known on host / read from the device layout with ``.item()``."""
    gate: Gate = "dspark"
    """``dspark``: output_size only if exact and DSpark (the fix); ``ungated``: if exact; ``always_sync``: never."""

    def __post_init__(self) -> None:
        for name, allowed in (
            ("path", get_args(Path)),
            ("mirror", _MIRRORS),
            ("layout_total", _TOTALS),
            ("gate", _GATES),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise InvalidVariant(name, f"one of {list(allowed)}", value)

    @property
    def label(self) -> str:
        """Short human name, e.g. ``graph/mirror=host/gate=dspark``."""
        return f"{self.path}/mirror={self.mirror}/layout_total={self.layout_total}/gate={self.gate}"

    def label_in(self, mode: str) -> str:
        """The label as a batch of ``mode`` is built: target verify spells every knob; any other mode has the path
        alone (its knobs are fixed, :func:`variants_for`), so its label claims no mirror or gate it has not got:
        ``graph/mode=draft_decode``."""
        return self.label if mode == "target_verify" else f"{self.path}/mode={mode}"

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "mirror": self.mirror, "layout_total": self.layout_total, "gate": self.gate}


BUILT_MODES: tuple[str, ...] = ("target_verify", "draft_extend", "decode", "draft_decode", "idle")
"""The modes of the MTP step the harness builds and judges; a batch of another raises
:class:`~metadata_builders.errors.ModeNotBuilt`."""


def variants_for(batch: VerifyBatch) -> list[Variant]:
    """Every valid variant of ``batch``: eager ones, then graph ones if it has a tier.

    A batch of any mode but target verify has the path only (its knobs are fixed: the caller always passes the host
    mirror, the lengths are uniform, and the token count is exact without a gate); a batch of a mode no builder builds
    yet raises :class:`~metadata_builders.errors.ModeNotBuilt`."""
    if batch.mode not in BUILT_MODES:
        raise ModeNotBuilt(batch.mode, BUILT_MODES)
    if batch.mode == "idle":
        return [Variant("graph")]  # an idle rank builds nothing eagerly (upstream returns early): its graph replays
    paths: list[Path] = ["eager"] + (["graph"] if batch.graph is not None else [])
    if batch.mode != "target_verify":
        return [Variant(path) for path in paths]
    out: list[Variant] = []
    for path in paths:
        if not batch.is_ragged:
            out += [Variant(path, m, "host", g) for m in _MIRRORS for g in _GATES]
        elif path == "eager":
            out += [Variant(path, "host", t, g) for t in _TOTALS for g in _GATES]
        else:
            out += [Variant(path, "host", "host", g) for g in _GATES]
    return out


def check_variant(batch: VerifyBatch, variant: Variant) -> None:
    """Raise :class:`InvalidVariant` if ``variant`` is not one of ``variants_for(batch)`` (``ModeNotBuilt`` for a
    batch of a mode no builder builds yet)."""
    if batch.mode not in BUILT_MODES:
        raise ModeNotBuilt(batch.mode, BUILT_MODES)
    if variant.path == "graph" and batch.graph is None:
        raise InvalidVariant("path", "'eager' for a batch without a graph tier", variant.path)
    if variant.path == "eager" and batch.mode == "idle":
        raise InvalidVariant("path", "'graph' for an idle batch (with MTP, upstream's init_forward_metadata returns "
                             "early on an idle rank: only its decode graph replays)", variant.path)
    if batch.mode != "target_verify":
        fixed = Variant(variant.path)
        for name in ("mirror", "layout_total", "gate"):
            if getattr(variant, name) != getattr(fixed, name):
                raise InvalidVariant(name, f"{getattr(fixed, name)!r} for a {batch.mode} batch (its only knob is "
                                     "the path)", getattr(variant, name))
        return
    if batch.is_ragged and variant.mirror != "host":
        raise InvalidVariant("mirror", "'host' for a ragged batch (the mirror knob is for uniform batches)",
                             variant.mirror)
    if (not batch.is_ragged or variant.path == "graph") and variant.layout_total != "host":
        raise InvalidVariant(
            "layout_total", "'host' except for an eager ragged batch (where it is a knob)", variant.layout_total
        )


def apply_gate(gate: Gate, exact: bool, is_dspark: bool) -> bool:
    """Whether the token map may pass ``output_size``, given the layout's ``exact``.

    ``dspark`` is upstream's fix ``exact_num_tokens = exact_num_tokens and is_dspark``.
    """
    if gate == "dspark":
        return exact and is_dspark
    if gate == "ungated":
        return exact
    return False


def divergence_applies(batch: VerifyBatch, variant: Variant) -> bool:
    """Whether ``batch.divergence`` reaches the device-side extend lengths of this build.

    The harness applies it (DESIGN.md section 4) where device lengths are not
    computed on the device from numbers the host holds: the builder's asynchronous
    host-to-device copy of host-staged lengths (uniform, ``mirror="host"``, and
    ``"tolist"``, which stages the same way once it has read the mirror back), and
    the device-resident ragged layout the harness hands in (every ragged variant).
    Uniform lengths built on the device with ``full_like`` (``mirror="device"``)
    cannot diverge.  Whether a divergence then *faults* is the reference's
    ``expected_faults``: only a map that trusts a host count can.
    """
    if batch.divergence is None or batch.divergence.extend_seq_lens is None:
        return False
    if batch.is_ragged:
        return True
    return variant.mirror in ("host", "tolist")
