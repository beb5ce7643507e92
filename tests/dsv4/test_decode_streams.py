"""The decode index streams: the pure specification, its torch twin and upstream's Triton build.

(a) worked examples written out by hand; (b) the torch function equals the pure
one on random inputs; (c) upstream's ``runtime.build_decode_streams`` under
``TRITON_INTERPRET=1`` equals the pure one on the entries it writes (the
``.venv-sglang`` step; skipped where SGLang is not importable).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable

if importlib.util.find_spec("triton") is not None and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before the first @triton.jit picks compiled or interpreted

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from metadata_builders.families.dsv4.hip.streams import decode_index_streams_torch
from metadata_builders.families.dsv4.reference.streams import (
    STREAM_FIELDS,
    canonical_streams,
    decode_index_streams,
    stream_capacities,
    tail_lengths,
)

UPSTREAM_RUNTIME = "sglang.kernels.ops.attention.dsv4.unified_kv_kernels.runtime"

WORKED = {
    "slots": [2, 2, 2, 1],
    "positions": [2, 3, 4, 6],
    "swa_lens": [3, 4, 4, 4],
    "hca_lens": [0, 0, 1, 2],
    "csa_lens": [0, 1, 1, 2],
    "hca_page_indices": [[-1, -1], [-1, -1], [5, -1], [7, -3]],
    "csa_width": 2, "win": 4, "ring_size": 6, "swa_pages": 100,
}
"""The module docstring's example: win 4, ring 6 (draft 3), two c128 page columns."""


def _call(fn: Callable[..., dict], args: dict) -> dict:
    positional = ("slots", "positions", "swa_lens", "hca_lens", "csa_lens", "hca_page_indices")
    keywords = ("csa_width", "win", "ring_size", "swa_pages")
    return fn(*(args[k] for k in positional), **{k: args[k] for k in keywords})


def _tensors(args: dict) -> dict:
    out = dict(args)
    for k in ("slots", "positions", "swa_lens", "hca_lens", "csa_lens"):
        out[k] = torch.tensor(args[k], dtype=torch.int32)
    width = len(args["hca_page_indices"][0]) if args["hca_page_indices"] else args.get("hca_width", 0)
    pages = torch.tensor(args["hca_page_indices"], dtype=torch.int32)
    out["hca_page_indices"] = pages.reshape(len(args["slots"]), width)
    return out


@st.composite
def stream_inputs(draw, *, compressed: bool | None = None) -> dict:
    """Arguments of one build: up to 6 tokens, windows up to 8, tails up to 5 wide.

    ``compressed=None`` draws it; off gives the empty compressed tail 0.5.21+
    substitute.  Shrinks towards no tokens, window 1, ring = window, compression off.
    """
    compressed = draw(st.booleans()) if compressed is None else compressed
    n = draw(st.integers(0, 6))
    win = draw(st.integers(1, 8))
    ring = win + draw(st.integers(0, 4))
    hca_width = draw(st.integers(0, 5)) if compressed else 0
    csa_width = draw(st.integers(0, 5)) if compressed else 0
    positions = draw(st.lists(st.integers(0, 3 * ring), min_size=n, max_size=n))
    hca_lens = draw(st.lists(st.integers(0, hca_width), min_size=n, max_size=n))
    return {
        "slots": draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)),
        "positions": positions,
        "swa_lens": [min(p + 1, win) for p in positions],
        "hca_lens": hca_lens,
        "csa_lens": draw(st.lists(st.integers(0, csa_width), min_size=n, max_size=n)),
        "hca_page_indices": [draw(st.lists(st.integers(-3, 50), min_size=hca_width, max_size=hca_width))
                             for _ in range(n)],
        "hca_width": hca_width,
        "csa_width": csa_width, "win": win, "ring_size": ring, "swa_pages": draw(st.integers(0, 1000)),
    }


# -- (a) worked examples ----------------------------------------------------------------

def test_worked_example():
    """The module docstring's four tokens: oldest-first windows, ring wrap, HCA tail after the window."""
    assert _call(decode_index_streams, WORKED) == {
        "swa_indices": [[12, 13, 14], [12, 13, 14, 15], [13, 14, 15, 16], [9, 10, 11, 6]],
        "swa_indptr": [0, 3, 7, 11, 15],
        "hca_indices": [[12, 13, 14], [12, 13, 14, 15], [13, 14, 15, 16, 105], [9, 10, 11, 6, 107, -1]],
        "hca_indptr": [0, 3, 7, 12, 18],
        "csa_indices": [[12, 13, 14], [12, 13, 14, 15], [13, 14, 15, 16], [9, 10, 11, 6]],
        "csa_indptr": [0, 3, 8, 13, 19],
    }


def test_compression_off_gives_three_equal_window_streams():
    """With an empty compressed tail every stream is the SWA window."""
    args = dict(WORKED, hca_lens=[0] * 4, csa_lens=[0] * 4, hca_page_indices=[[]] * 4, csa_width=0)
    out = _call(decode_index_streams, args)
    assert out["hca_indices"] == out["csa_indices"] == out["swa_indices"]
    assert out["hca_indptr"] == out["csa_indptr"] == out["swa_indptr"] == [0, 3, 7, 11, 15]


def test_pad_tokens_read_position_zero_of_their_slot():
    """Tier pad tokens (seq_lens_casual 1, position 0) get one entry: ring row 0 of the last row's slot."""
    args = dict(WORKED, slots=[3, 3], positions=[0, 0], swa_lens=[1, 1], hca_lens=[0, 0], csa_lens=[0, 0],
                hca_page_indices=[[-1, -1]] * 2)
    out = _call(decode_index_streams, args)
    assert out["swa_indices"] == [[18], [18]] and out["hca_indptr"] == [0, 1, 2]


def test_capacities():
    """The worked example's buffers hold 16, 24 and 24 entries."""
    assert stream_capacities(4, win=4, hca_width=2, csa_width=2) == {
        "swa_indices": 16, "hca_indices": 24, "csa_indices": 24}


def test_tail_lengths_on_and_off():
    """c128 lengths are unclamped ``// 128``; c4 lengths ``// 4`` clamped to the top-k; off is all zeros."""
    assert tail_lengths([3, 130, 2049], index_topk=512) == ([0, 1, 16], [0, 32, 512])
    assert tail_lengths([3, 130], index_topk=None) == ([0, 0], [0, 0])


def test_canonical_form_drops_the_csa_tail_and_the_slack():
    """Upstream's unwritten entries (here 999) never reach the canonical form."""
    flat = {
        "swa_indptr": [0, 3, 7, 11, 15], "hca_indptr": [0, 3, 7, 12, 18], "csa_indptr": [0, 3, 8, 13, 19],
        "swa_indices": [12, 13, 14, 12, 13, 14, 15, 13, 14, 15, 16, 9, 10, 11, 6, 999],
        "hca_indices": [12, 13, 14, 12, 13, 14, 15, 13, 14, 15, 16, 105, 9, 10, 11, 6, 107, -1] + [999] * 6,
        "csa_indices": [12, 13, 14, 12, 13, 14, 15, 999, 13, 14, 15, 16, 999, 9, 10, 11, 6, 999, 999] + [999] * 5,
    }
    assert canonical_streams(flat) == _call(decode_index_streams, WORKED)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"swa_lens": [3, 4, 3, 4]}, r"swa_lens\[2\]=3 must be in 4\.\.4"),
        ({"hca_lens": [0, 0, 3, 2]}, r"hca_lens\[2\]=3 must be in 0\.\.2"),
        ({"csa_lens": [0, 0, 0, 3]}, r"csa_lens\[3\]=3 must be in 0\.\.2"),
        ({"positions": [2, 3, -1, 6]}, r"positions\[2\]=-1"),
        ({"slots": [2, 2]}, r"len\(positions\)=4 must equal len\(slots\)=2"),
    ],
    ids=["window_mismatch", "hca_past_width", "csa_past_width", "negative_position", "length_mismatch"],
)
def test_precondition_names_the_argument(change, message):
    """Inputs outside the defined domain are rejected with the argument and token named."""
    with pytest.raises(ValueError, match=message):
        _call(decode_index_streams, dict(WORKED, **change))


# -- (b) torch equals the pure specification ----------------------------------------------

def _check_upstream_shapes(out: dict, args: dict) -> None:
    n, width = len(args["slots"]), args["hca_width"]
    caps = stream_capacities(n, win=args["win"], hca_width=width, csa_width=args["csa_width"])
    for name in STREAM_FIELDS:
        assert out[name].dtype == torch.int32, name
        expected = (caps[name],) if name in caps else (n + 1,)
        assert tuple(out[name].shape) == expected, name


@settings(deadline=None)
@given(stream_inputs())
@example(dict(WORKED, hca_width=2)).via("the worked example")
def test_torch_equals_pure(args):
    """The torch build, read back in canonical form, is the pure one; shapes and dtypes are upstream's."""
    out = _call(decode_index_streams_torch, _tensors(args))
    _check_upstream_shapes(out, args)
    assert canonical_streams({k: v.tolist() for k, v in out.items()}) == _call(decode_index_streams, args)


def test_torch_reads_no_values():
    """On ``meta`` tensors (no values to read) the torch build runs: no host sync, no data-dependent shape."""
    args = _tensors(dict(WORKED, hca_width=2))
    meta = {k: (v.to("meta") if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
    out = _call(decode_index_streams_torch, meta)
    _check_upstream_shapes(out, dict(WORKED, hca_width=2))


# -- (c) upstream's Triton build equals the pure specification -----------------------------

@pytest.fixture(scope="module")
def upstream_runtime():
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang is not importable (the .venv-sglang step runs this)")
    return pytest.importorskip(UPSTREAM_RUNTIME)


def _upstream(runtime, args: dict) -> dict:
    t = _tensors(args)
    outs = runtime.build_decode_streams(
        state_slot=t["slots"], positions=t["positions"], swa_len=t["swa_lens"], hca_len=t["hca_lens"],
        csa_len=t["csa_lens"], hca_page_indices=t["hca_page_indices"], csa_width=args["csa_width"],
        win=args["win"], ring_stride=args["ring_size"], swa_pages=args["swa_pages"],
    )
    return dict(zip(STREAM_FIELDS, outs))


@pytest.mark.triton
@settings(deadline=None, max_examples=25)
@given(args=stream_inputs())
@example(args=dict(WORKED, hca_width=2)).via("the worked example")
@example(args=dict(WORKED, hca_lens=[0] * 4, csa_lens=[0] * 4, hca_page_indices=[[]] * 4, csa_width=0,
                   hca_width=0)).via("compression off")
def test_upstream_equals_pure(upstream_runtime, args):
    """``build_decode_streams`` (interpreted Triton) writes exactly the canonical entries, compression on and off."""
    out = _upstream(upstream_runtime, args)
    _check_upstream_shapes(out, args)
    assert canonical_streams({k: v.tolist() for k, v in out.items()}) == _call(decode_index_streams, args)


def test_a_stream_read_past_its_buffer_is_a_check_of_its_own() -> None:
    """An indptr whose last segment ends past its indices buffer (the read the attention kernel would make there) is
    check ``p<N>.stream_out_of_bounds`` with the field, token and segment as data -- not ``builder raised``."""
    import dataclasses

    from _examples import make_batch

    from metadata_builders import Geometry
    from metadata_builders.families.dsv4.builders import AuditedBuilder
    from metadata_builders.families.dsv4.hip import HipBuilder
    from metadata_builders.families.dsv4.properties import PROPERTIES
    from metadata_builders.families.dsv4.properties.spec import verdict

    class PastTheBuffer(HipBuilder):
        def index_streams(self, inputs, fields):
            out = super().index_streams(inputs, fields)
            out["swa_indptr"] = out["swa_indptr"].clone()
            out["swa_indptr"][-1] = out["swa_indices"].numel() + 1
            return out

    geometry = Geometry(page_size=4, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=4)
    batch = dataclasses.replace(make_batch([5, 6], [1, 2], 3), geometry=geometry)  # 6 tokens, windows of 4
    specs = {p.name: p for p in PROPERTIES}
    result = verdict(specs["P1"], AuditedBuilder(PastTheBuffer(), factory=PastTheBuffer), batch)
    failure = result.failure
    assert result.status == "failed" and failure.check == "p1.stream_out_of_bounds", failure
    assert (failure.field, failure.index, failure.actual) == ("swa_indices", (5,), [20, 25]), failure
    assert failure.expected == "inside [0, 24)" and "builder raised" not in str(failure)
    assert failure.origin is not None and failure.origin.function == "canonical_streams"
