"""An example test file for your own project: the harness's properties as pytest tests of your builder.

Copy it into your tests, install metadata-builders in the same environment (its
pytest plugin loads itself), and run::

    python -m pytest tests/test_my_builder.py --mb-builder mypkg.builders:MyBuilder

``builder`` is the plugin's fixture: your builder, audited, on ``--mb-device``.
``batches_for("P6")`` draws what ``metadata-builders check`` draws for P6 (batches
whose device lengths diverge from the host's belief); ``verify_batches()`` alone
draws none, so a P6 test on it could not see the dspark gate dropped.  The
plugin loads its own Hypothesis profile (deadlines off; ``ci`` when ``CI`` is set,
``--mb-profile`` to choose) unless you chose one of yours.  tests/test_plugin.py
runs this very file against the bundled builder (green) and the dropped dspark
gate (red on P6).
"""

from hypothesis import given

from metadata_builders.properties import (
    batches_for,
    check_p1_reference,
    check_p6_fault_model,
    check_p7_capture_safety,
    check_p10_kv_state,
)


@given(batch=batches_for("P1"))
def test_every_variant_equals_the_reference(builder, batch):
    check_p1_reference(builder, batch)


@given(batch=batches_for("P6"))
def test_a_diverging_device_length_faults_only_where_the_model_says(builder, batch):
    check_p6_fault_model(builder, batch)


@given(batch=batches_for("P7"))
def test_syncs_only_where_the_contract_allows(builder, batch):
    check_p7_capture_safety(builder, batch)


@given(batch=batches_for("P10"))
def test_ring_stores_touch_no_live_row_they_do_not_own(builder, batch):
    check_p10_kv_state(builder, batch)
