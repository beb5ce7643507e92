"""Deprecated alias of :mod:`metadata_builders.tools.power` (moved in 0.2); see :mod:`metadata_builders._moved`."""

from metadata_builders._moved import alias
from metadata_builders.tools import power as _moved

alias(globals(), _moved)
