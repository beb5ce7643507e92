"""A DSA builder of your own (``--family dsa``): the bundled ``dsa-torch`` builder with its eager page-table stage
written anew (docs/BUILDERS.md, "A builder of the DSA family").

``MyDSABuilder`` is correct; ``MyDSABuilderOffByOne`` carries a bug of this family's domain (the real page index
taken from the slot *after* a page's first, ``(slot + 1) // page_size``: a page whose first slot is the last of a
physical page reads the page after it).  Both declare the modes they build: draft decode is left out, and
``check`` says so (``not run draft_decode``), never judging a build they do not make.  From ``docs/examples``::

    metadata-builders check --family dsa --builder mypkg.dsa:MyDSABuilder            # held
    metadata-builders check --family dsa --builder mypkg.dsa:MyDSABuilderOffByOne    # red (P1)
    python -m pytest test_my_dsa_builder.py --mb-family dsa --mb-builder mypkg.dsa:MyDSABuilder
"""

from __future__ import annotations

from typing import Any

import torch

from metadata_builders.families.dsa import DSABuilder, DSAInputs


def real_page_table(page_table_1: torch.Tensor, page_size: int) -> torch.Tensor:
    """Token slots -> the page of each row's every ``page_size``-th slot (``-1``, past the row, stays ``-1``)."""
    return torch.div(page_table_1[:, ::page_size], page_size, rounding_mode="floor")


class MyDSABuilder(DSABuilder):
    """The bundled builder's graph path; its eager build with ``real_page_table`` computed here."""

    name = "mypkg-dsa"
    modes = ("target_verify", "draft_extend", "decode", "idle")
    slot_shift = 0

    def build(self, inputs: DSAInputs) -> dict[str, Any]:
        fields = super().build(inputs)
        fields["real_page_table"] = real_page_table(fields["page_table_1"] + self.slot_shift, inputs.page_size)
        return fields


class MyDSABuilderOffByOne(MyDSABuilder):
    """The same, one slot late: red on P1 (``real_page_table``)."""

    name = "mypkg-dsa-off-by-one"
    slot_shift = 1
