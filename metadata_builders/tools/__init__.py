"""The tools that measure the harness; none of them is part of a verdict.

``mutants`` (the catalogue of seeded faults in ``hip`` and the command that
kills them), ``power`` (mutant kills of the strategies against random
sampling), ``bench`` (build times, examples per second) and ``shard`` (a pytest
plugin keeping one shard of the selected tests, for the nightly matrix).  ``check``,
``replay`` and ``gate`` never import them; ``power`` imports ``mutants``, and
nothing imports the other way.
"""
