"""The batch model: what a target-verify builder is given, as plain data.

A :class:`VerifyBatch` is ints and lists only, so it round-trips through JSON
(schema ``metadata-builders/verify-batch@1``) and a failing batch can be written
to a replay file and rebuilt bit for bit.  Validation is part of the product:
every precondition of the builders is checked here and broken ones raise
:class:`~metadata_builders.errors.InvalidBatch` naming field, index and value,
so no builder ever sees a batch that would make it raise ``IndexError``.

==============  ==============================================================================
module          what it holds
==============  ==============================================================================
``model``       :class:`VerifyBatch`: its fields (each with its shape), the sizes derived
                from them, :meth:`~VerifyBatch.describe`, ``replace``; start here
``modes``       :data:`MODES`, the builds of one MTP step a batch can be of, and :data:`DECODE_MODES`
``parts``       :class:`Geometry` (and its :class:`Compression`), :class:`GraphTier`, :class:`Divergence`
``validation``  every cross-field rule a batch keeps, each error naming field and index
``schema``      :data:`SCHEMA` and the JSON (``to_dict``/``from_dict``/``to_json``/``from_json``)
``checks``      the value checks the others share (ints, lists of ints, known keys)
==============  ==============================================================================

The package knows nothing of the builders (``tests/core/test_layout.py`` checks it).
"""

from __future__ import annotations

from metadata_builders.families.dsv4.batch.model import VerifyBatch
from metadata_builders.families.dsv4.batch.modes import DECODE_MODES, MODES
from metadata_builders.families.dsv4.batch.parts import Compression, Divergence, Geometry, GraphTier
from metadata_builders.families.dsv4.batch.schema import SCHEMA

__all__ = ["DECODE_MODES", "MODES", "SCHEMA", "Compression", "Divergence", "Geometry", "GraphTier", "VerifyBatch"]
