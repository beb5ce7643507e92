"""Root conftest: load the harness's pytest plugin (a no-op when the installed entry
point already did).  The plugin picks the Hypothesis profile (``ci`` under CI,
else ``dev``; ``--mb-profile`` or ``--hypothesis-profile`` overrides)."""

from __future__ import annotations

import torch

pytest_plugins = ["metadata_builders.plugin", "pytester"]

# Target-verify tensors are tiny; under xdist every worker would otherwise spin two threads.
torch.set_num_threads(1)
