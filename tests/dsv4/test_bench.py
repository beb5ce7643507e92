"""``metadata-builders bench``: a benchmark, never a test of speed; here only that it says what it measured."""

from __future__ import annotations

from metadata_builders.families.dsv4.tools.bench import ratio_rows


def test_the_ratio_table_is_each_builders_rate_and_how_many_times_slower_the_others_ran() -> None:
    rows = [["hip", "P1", "every variant", 100, "2.50s", "40.0", "held"],
            ["sglang", "P1", "every variant", 100, "10.00s", "10.0", "held"],
            ["hip", "P2", "mirrors", 100, "1.00s", "100.0", "held"],
            ["sglang", "P2", "mirrors", 0, "0.00s", "0.0", "FAILED"]]
    assert ratio_rows(["hip", "sglang"], rows) == [["P1", "40.0", "10.0", "4.00x"], ["P2", "100.0", "0.0", "-"]]
