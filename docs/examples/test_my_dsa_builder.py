"""An example test file for your own DSA builder (SGLang's DSA backend family): every property of the family as
pytest tests of your builder.

Copy it into your tests, install metadata-builders in the same environment (its pytest plugin loads itself), and
run::

    python -m pytest tests/test_my_dsa_builder.py --mb-family dsa --mb-builder mypkg.dsa:MyDSABuilder

``builder`` is the plugin's fixture: under ``--mb-family dsa``, your builder audited as ``metadata-builders check
--family dsa`` audits it (``dsa-torch``, the bundled builder, when ``--mb-builder`` names none; ``sglang`` runs
the installed SGLang's own ``DeepseekSparseAttnBackend``).  One test per (property, mode): each draws what
``check`` draws for that mode (divergences, stale mirrors, graph tiers, wide tables) and judges one property on a
fresh twin of the builder, as ``check`` does per example (P9 brings its own histories; a twin carries no state
of the previous example).  A (property, mode) that ``check`` does not judge -- the builder does not declare the
mode, or the property does not apply there -- is skipped, saying why.  tests/core/test_plugin.py runs this very file on
the bundled builder (green) and on a catalogue mutant, the tracker's #30378 (red on P1).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata_builders.families.dsa import MODES, PROPERTIES, dsa_batches, not_applicable


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prop", list(PROPERTIES))
@given(data=st.data())
def test_every_property_holds_in_every_mode(builder, prop, mode, data):
    why = not_applicable(builder, prop, mode)
    if why is not None:
        pytest.skip(why)
    PROPERTIES[prop](builder.fresh(), data.draw(dsa_batches(modes=[mode]), label="batch"))
