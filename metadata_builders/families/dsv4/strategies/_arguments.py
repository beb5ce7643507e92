"""What the strategies accept: each argument checked, with Hypothesis's ``InvalidArgument`` naming it."""

from __future__ import annotations

from hypothesis.errors import InvalidArgument

from metadata_builders.families.dsv4.batch import Geometry


def _check_count(name: str, value: int | None, minimum: int, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "None (draw it) or an int" if optional else "an int"
        raise InvalidArgument(f"{name}={value!r} must be {what} >= {minimum}")


def _check_range(min_name: str, lo: int, max_name: str, hi: int, minimum: int) -> None:
    _check_count(min_name, lo, minimum, optional=False)
    _check_count(max_name, hi, minimum, optional=False)
    if hi < lo:
        raise InvalidArgument(f"{max_name}={hi} must be >= {min_name}={lo}")


def _check_batch_arguments(
    min_requests: int, max_requests: int, num_draft_tokens: int | None, max_pad_rows: int, geometry: Geometry | None,
    equal_windows: bool = False,
) -> None:
    _check_range("min_requests", min_requests, "max_requests", max_requests, 1)
    _check_count("num_draft_tokens", num_draft_tokens, 1)
    _check_count("max_pad_rows", max_pad_rows, 0, optional=False)
    if geometry is not None and not isinstance(geometry, Geometry):
        raise InvalidArgument(f"geometry={geometry!r} must be None (draw it) or a Geometry")
    if equal_windows and geometry is not None and geometry.swa_window != geometry.unified_swa_window:
        raise InvalidArgument(f"equal_windows=True with geometry={geometry!r}: its windows differ")


_DRAWN_MODES = ("target_verify", "draft_extend", "decode", "draft_decode", "idle")


def _check_mode(mode: str, num_draft_tokens: int | None, graph: bool | None = None, **pinned: bool | None) -> None:
    """A batch of a mode other than target verify is uniform, without divergence or stale mirror: refuse a pin
    that says otherwise, and a draft-decode batch with fewer than three draft tokens."""
    if mode not in _DRAWN_MODES:
        raise InvalidArgument(f"mode={mode!r} must be one of {', '.join(map(repr, _DRAWN_MODES))} (the modes built)")
    for name, value in pinned.items():
        if value:
            raise InvalidArgument(f"{name}={value!r}: a {mode} batch is uniform, without divergence")
    if mode == "idle" and graph is False:
        raise InvalidArgument("graph=False: an idle batch is a graph tier of pad rows "
                              "(its rank builds nothing eagerly)")
    if mode == "draft_decode" and num_draft_tokens is not None and num_draft_tokens < 3:
        raise InvalidArgument(f"num_draft_tokens={num_draft_tokens} must be >= 3 for mode='draft_decode' (steps = "
                              "num_draft_tokens - 1, and the last step runs no forward)")
