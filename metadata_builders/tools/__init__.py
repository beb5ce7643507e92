"""The tools every family's runs share; none of them is part of a verdict.

``shard`` (a pytest plugin keeping one shard of the selected tests, for the nightly matrix).  A family's own
measuring tools live in its package (DSV4's ``mutants``, ``power`` and ``bench``).
"""
