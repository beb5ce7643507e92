"""What a DSV4 builder offers, as data: :class:`Capabilities`, read once from its class's declarations (class
variables with defaults, docs/BUILDERS.md "Declaring capabilities") by the core's
:func:`metadata_builders.families.dsv4.builders.capabilities_of`, which infers from methods only what no class
declares (a builder
of the user's that declares nothing); the reference, run unaudited, states its own (``ReferenceBuilder.capabilities``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from metadata_builders.families.dsv4.tier import DEFAULT_CAPTURE_GEOMETRY, DEFAULT_PADDING, CaptureGeometry, Padding

__all__ = ["BuildContract", "Capabilities", "GraphContract"]

BuildContract = Literal["inputs", "batch"]
"""``inputs``: ``build(inputs)`` (0.2+); ``batch``: the deprecated ``build(batch, variant)`` (0.1)."""

GraphContract = Literal["phases", "python_replay", "none"]
"""``phases``: ``out_graph``/``in_graph`` (recorded and re-executed as a GPU does); ``python_replay``: 0.2's
``capture()``/``replay()`` (its Python runs at replay: P5 ``partial``); ``none``: no graph replay."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one builder offers, as data."""

    build: BuildContract = "inputs"
    graph: GraphContract = "none"
    padding: Padding = DEFAULT_PADDING
    """The tier padding convention its graph path follows (``padding_convention`` on the class; a builder that
    declares none is judged as ``absorb_then_clamp``, the model's rule before conventions were named)."""
    mirror_validation: bool = False
    """Offers ``with_mirror_validation()`` (P2's stale-mirror half)."""
    expresses: bool = False
    """Says which variants it can express (``variants_supported``); False: all of them."""
    upstream: bool = False
    """Upstream code (SGLang's own): known findings may name its failures."""
    routes: tuple[str, ...] = ()
    """Kernel routes it runs (``triton``, ``torch``), when it has several."""
    modes: tuple[str, ...] = ("target_verify",)
    """The metadata builds of the MTP step it implements (docs/DESIGN.md section 3)."""
    seq_len_fill_value: int = 1
    """What its graph runner puts in a pad row's ``seq_len`` (``seq_lens`` and the host mirror): upstream asks the
    backend, ``get_cuda_graph_seq_len_fill_value()`` (1 on every release 0.5.18-0.5.23).  Declared as a class
    variable (``seq_len_fill_value = 1``), or set on the instance where upstream's code decides it (the ``sglang``
    adapter asks the installed release's backend).  The reference's pad rows hold 1 (DESIGN.md section 2): a
    builder whose runner fills another value is judged on what it then builds."""
    modes_declared: bool = True
    """Its class declares ``modes`` (False: none does, and :attr:`modes` is the documented default, target verify
    alone: ``check``'s per-mode table says so)."""
    store_kernels: bool = False
    """Runs upstream's own KV store kernel (``swa_store_rows``): P10 judges where the kernel stores each token,
    not only where the metadata says it would."""
    capture_layout: bool = False
    """Brings its graph runner's capture layout (``capture_verify_lens(graph_num_tokens, slots, width)``:
    upstream's own runner code); False: the harness's model of upstream's runner
    (:func:`~metadata_builders.families.dsv4.tier.capture_verify_lens`)."""
    capture_geometry: CaptureGeometry = DEFAULT_CAPTURE_GEOMETRY
    """The request slots its graph runner captures a compact ragged token tier with (``capture_geometry`` on the
    class; a builder that declares none is judged as ``token_slots``, the released runner's rule): P5's runner
    half captures with it (docs/DESIGN.md section 3)."""
    switches: tuple[str, ...] = ()
    """Upstream environment switches its builds turn on that upstream's default leaves off (a route of upstream's
    code: ``gasm`` turns on ``SGLANG_DSV4_GROUPED_ASM``).  The reference adds what they build, and a batch that does
    not reach the switched path is ``not applicable`` (``outside_switches(batch)`` says why)."""
    capture_slots: bool = False
    """Brings its runner's slot rule (``ragged_capture_slots(graph_num_tokens, max_bs, width)``: upstream's
    ``_ragged_capture_slots``), which P5 holds to the declared :attr:`capture_geometry`."""
    inferred: tuple[str, ...] = ()
    """The capabilities read from its methods because no class of it declares them (the class variables' names,
    ``graph_contract``, ``mirror_validation``, ...): all of them for a builder that declares nothing, none for a
    bundled one.  ``check``'s header says which (docs/BUILDERS.md, "Declaring capabilities")."""

    @property
    def declared(self) -> bool:
        """Every capability came from a declaration (class variables), none from inference."""
        return not self.inferred

    @property
    def replays(self) -> bool:
        """It models graph capture and replay at all (P5's replay half, P7's and P8's replays)."""
        return self.build == "inputs" and self.graph != "none"

    @property
    def records_graph(self) -> bool:
        """Its replay re-executes what capture recorded (no Python of the builder at replay)."""
        return self.build == "inputs" and self.graph == "phases"
