"""What every family's runs share: the Hypothesis profiles (``metadata-builders-dev``/``-ci``/``-nightly``) and
the work folder ``.metadata-builders/`` (:mod:`metadata_builders.runs.profiles`).  A family's own runs -- its
``check``, its property runner, its replay files and findings -- live in its package."""
