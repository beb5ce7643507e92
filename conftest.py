"""Root conftest: load the harness's pytest plugin (a no-op when the installed
entry point already did) and pick the Hypothesis profile: ``ci`` under CI
(``CI`` set), else ``dev``; ``--hypothesis-profile`` overrides either."""

from __future__ import annotations

import os

import torch
from hypothesis import settings

from metadata_builders.profiles import register_profiles

pytest_plugins = ["metadata_builders.plugin", "pytester"]

register_profiles()
settings.load_profile("ci" if os.environ.get("CI") else "dev")
# Target-verify tensors are tiny; under xdist every worker would otherwise spin two threads.
torch.set_num_threads(1)
