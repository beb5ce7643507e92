"""The tools that measure the DSV4 family's harness; none of them is part of a verdict.

``power`` (mutant kills of the strategies against random sampling) and ``bench`` (build times, examples per
second); the mutant catalogue is :mod:`metadata_builders.families.dsv4.mutants`.  ``check``, ``replay`` and ``gate``
never import them; ``power`` imports ``mutants``, and nothing imports the other way.
"""
