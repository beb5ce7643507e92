"""An example test file for your own project: the harness's properties as pytest tests of your builder.

Copy it into your tests, install metadata-builders in the same environment (its
pytest plugin loads itself), and run::

    python -m pytest tests/test_my_builder.py --mb-builder mypkg.builders:MyBuilder

``builder`` is the plugin's fixture: your builder, audited, on ``--mb-device``.
Each test is parametrized over the property's focused runs (``focuses_for``), so
every focus gets its own Hypothesis run of the profile's examples, as in
``metadata-builders check``: the same properties on the same batches, in every
mode your builder declares (a focus of a mode it does not declare is skipped,
saying so).  ``focus.batches`` draws what ``check`` draws for that focus: P6's
diverge from the host's belief (``verify_batches()`` alone draws none, so a P6
test on it could not see the dspark gate dropped).  The plugin loads its own
Hypothesis profile (deadlines off; ``ci`` when ``CI`` is set, ``--mb-profile`` to
choose) unless you chose one of yours.  tests/core/test_plugin.py runs this very file
against the bundled builder (green), the dropped dspark gate (red on P6) and a
draft-decode bug (red on P1).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata_builders import (
    check_p1_reference,
    check_p6_fault_model,
    check_p7_capture_safety,
    check_p10_kv_state,
    focuses_for,
)


@pytest.mark.parametrize("focus", focuses_for("P1"), ids=str)
@given(data=st.data())
def test_every_variant_equals_the_reference(builder, focus, data):
    check_p1_reference(builder, data.draw(focus.batches, label="batch"))


@pytest.mark.parametrize("focus", focuses_for("P6"), ids=str)
@given(data=st.data())
def test_a_diverging_device_length_faults_only_where_the_model_says(builder, focus, data):
    check_p6_fault_model(builder, data.draw(focus.batches, label="batch"))


@pytest.mark.parametrize("focus", focuses_for("P7"), ids=str)
@given(data=st.data())
def test_syncs_only_where_the_contract_allows(builder, focus, data):
    check_p7_capture_safety(builder, data.draw(focus.batches, label="batch"))


@pytest.mark.parametrize("focus", focuses_for("P10"), ids=str)
@given(data=st.data())
def test_ring_stores_touch_no_live_row_they_do_not_own(builder, focus, data):
    check_p10_kv_state(builder, data.draw(focus.batches, label="batch"))
