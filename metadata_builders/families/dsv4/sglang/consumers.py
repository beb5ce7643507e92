"""Upstream's KV store kernels run on id-valued pools: the consumer P10 judges, not only its model.

P10 (:mod:`metadata_builders.families.dsv4.properties.kv`) derives each store a target-verify
step makes from the metadata, as upstream's kernels consume it.  Where the
kernel itself runs on CPU (Triton, under the interpreter), the SGLang builder
hands P10 the kernel instead of the formula, so a bug in the consumer is judged
too -- one that leaves every metadata field equal.  Today that is the verify
step's SWA ring store, ``store_swa_into_unified`` (``kernels/ops/kvcache/
dsv4_unified_kv_store.py``; the fp8 path's store, ``final_pos = positions``).
The fused bf16 norm-rope-store (``fused_qk_norm_rope_store.py``, the consumer of
``swa_loc``) does not run here: P10 models it, and the gate lists it as a file the
CPU gate cannot judge.

How: every token's K is a row holding its own id (``t + 1``) in a float32 pool of
the rings of the slots the tokens name, with a ring's rows of guard before and after;
after one launch, the row holding ``t + 1`` is where the kernel stored token ``t``
-- a row outside its slot's ring is reported as such (the store's ``pos %
ring_stride`` is C's remainder: a negative position lands before its slot's ring),
no row at all is a store the kernel dropped or overwrote.  Worked example: ring
stride 6, a token of slot 1 at position 7 is found at row 7; a token of slot 0 at
position -3 at row -3, outside the ring.
"""

from __future__ import annotations

import importlib
from typing import Any, Sequence

__all__ = ["MAX_POOL_ROWS", "STORE_MODULES", "swa_store_rows"]

STORE_MODULES = ("sglang.kernels.ops.kvcache.dsv4_unified_kv_store",
                 "sglang.kernels.ops.attention.dsv4.unified_kv_kernels.runtime")
"""Where upstream keeps ``store_swa_into_unified``: its own module in 0.5.23, the unified-KV runtime in 0.5.18
(the same keyword signature); the first that has it is run."""


def _store() -> Any:
    for name in STORE_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        store = getattr(module, "store_swa_into_unified", None)
        if store is not None:
            return store
    return None


MAX_POOL_ROWS = 1 << 20
"""The largest id-valued pool run (a ring of more rows -- the strategies draw ``ring_size`` up to ``2**30`` -- is
judged on P10's model instead)."""


def swa_store_rows(state_slot: Sequence[int], positions: Sequence[int], *, ring_stride: int, win: int,
                   device: Any = "cpu") -> list[int | None] | None:
    """Where upstream's ``store_swa_into_unified`` stores each token (a row of the ring, possibly outside it), None
    for a token whose K the kernel left nowhere; None when the release has no such kernel or the ring is too large.

    The pool holds only the slots the tokens name, renumbered ``1..k`` with one slot's rows of guard on each side
    (``0`` and ``k + 1``); a row found at ``s' * stride + off`` for a token of slot ``s`` is ``s * stride + off``.
    """
    import torch

    store = _store()
    if store is None:
        return None
    n = len(state_slot)
    if n == 0:
        return []
    slots = sorted(set(state_slot))
    renumbered = {s: i + 1 for i, s in enumerate(slots)}
    rows = (len(slots) + 2) * ring_stride
    if rows > MAX_POOL_ROWS:
        return None
    pool = torch.zeros(rows, 2, dtype=torch.float32, device=device)
    kv = (torch.arange(n, dtype=torch.float32, device=device) + 1).unsqueeze(1).expand(n, 2).contiguous()
    pos = torch.tensor(list(positions), dtype=torch.int64, device=device)
    local = torch.tensor([renumbered[s] for s in state_slot], dtype=torch.int32, device=device)
    store(kv=kv, state_slot=local, positions=pos, unified_kv=pool, win=win, ring_stride=ring_stride, final_pos=pos)
    found: dict[int, int] = {}
    for index, value in enumerate(pool[:, 0].tolist()):
        if value:
            t = int(value) - 1
            found[t] = state_slot[t] * ring_stride + index - renumbered[state_slot[t]] * ring_stride
    return [found.get(t) for t in range(n)]
