"""The decode index streams with plain torch: ``runtime.build_decode_streams`` without Triton.

Same semantics as :func:`metadata_builders.families.dsv4.reference.streams.decode_index_streams`
(formulas, worked example and what upstream passes are in that module's
docstring); here the result has upstream's shapes and dtypes:

================  ===================================  =====
field             shape                                dtype
================  ===================================  =====
``swa_indices``   ``(N * win,)``                       int32
``swa_indptr``    ``(N + 1,)``                         int32
``hca_indices``   ``(N * (win + hca_width),)``         int32
``hca_indptr``    ``(N + 1,)``                         int32
``csa_indices``   ``(N * (win + csa_width),)``         int32
``csa_indptr``    ``(N + 1,)``                         int32
================  ===================================  =====

Any device, no host sync, no data-dependent shape: every token's candidate
segment is laid out as a fixed-width row and scattered to ``indptr[t] + k``;
the entries it must not write go to one dump slot past the buffer's capacity,
which is cut off.  Entries upstream leaves unwritten (the CSA tails, the space
past ``indptr[N]``) are ``-1`` here; they are never judged.  Outside the
precondition (``swa_len[t] != min(pos + 1, win)``) the window writes its first
``min(pos + 1, win, swa_len[t])`` entries and never leaves its segment, where
upstream's kernel overruns into the next one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["decode_index_streams_torch"]

_I32 = torch.int32
_I64 = torch.int64


def _indptr(lengths: torch.Tensor) -> torch.Tensor:
    """``[3, 4, 5] -> [0, 3, 7, 12]`` in int32 (``_lengths_to_indptr``)."""
    return F.pad(torch.cumsum(lengths, dim=0, dtype=_I32), (1, 0))


def _scatter(values: torch.Tensor, written: torch.Tensor, start: torch.Tensor, capacity: int) -> torch.Tensor:
    """Row ``t``'s written entries to ``start[t] + k`` of a ``(capacity,)`` int32 buffer, the rest ``-1``."""
    k = torch.arange(values.shape[1], device=values.device, dtype=_I64)
    dest = torch.where(written, start.to(_I64)[:, None] + k, capacity)  # capacity: the dump slot
    buf = torch.full((capacity + 1,), -1, dtype=_I32, device=values.device)
    buf.scatter_(0, dest.reshape(-1), values.reshape(-1).to(_I32))
    return buf[:capacity]


def decode_index_streams_torch(
    slots: torch.Tensor,
    positions: torch.Tensor,
    swa_lens: torch.Tensor,
    hca_lens: torch.Tensor,
    csa_lens: torch.Tensor,
    hca_page_indices: torch.Tensor,
    *,
    csa_width: int,
    win: int,
    ring_size: int,
    swa_pages: int,
) -> dict[str, torch.Tensor]:
    """The six streams as upstream returns them (flat int32 buffers of fixed capacity, int32 indptrs).

    ``slots``, ``positions`` and the three lengths are ``(N,)`` of any integer
    dtype; ``hca_page_indices`` is ``(N, hca_width)``, ``hca_width`` possibly 0.
    """
    n, hca_width = hca_page_indices.shape
    dev = slots.device
    swa_len = swa_lens.to(_I64)
    hca_len = hca_lens.to(_I64)
    pos = positions.to(_I64)
    swa_p = _indptr(swa_lens.to(_I32))
    hca_p = _indptr((swa_lens + hca_lens).to(_I32))
    csa_p = _indptr((swa_lens + csa_lens).to(_I32))

    i = torch.arange(win, device=dev, dtype=_I64)
    first = pos - torch.clamp(pos + 1, max=win) + 1  # the oldest position of the window
    window = slots.to(_I64)[:, None] * ring_size + torch.remainder(first[:, None] + i, ring_size)
    window_written = i < torch.minimum(torch.clamp(pos + 1, max=win), swa_len)[:, None]

    k = torch.arange(win + hca_width, device=dev, dtype=_I64)
    in_tail = (k >= swa_len[:, None]) & (k < (swa_len + hca_len)[:, None])
    hca_rows = F.pad(window, (0, hca_width))
    if hca_width:
        j = torch.clamp(k - swa_len[:, None], 0, hca_width - 1)
        pages = torch.gather(hca_page_indices.to(_I64), 1, j)
        tail = torch.where(pages >= 0, pages + swa_pages, -1)
        hca_rows = torch.where(in_tail, tail, hca_rows)
    hca_written = F.pad(window_written, (0, hca_width)) | in_tail

    return {
        "swa_indices": _scatter(window, window_written, swa_p[:-1], n * win),
        "swa_indptr": swa_p,
        "hca_indices": _scatter(hca_rows, hca_written, hca_p[:-1], n * (win + hca_width)),
        "hca_indptr": hca_p,
        "csa_indices": _scatter(window, window_written, csa_p[:-1], n * (win + csa_width)),
        "csa_indptr": csa_p,
    }
