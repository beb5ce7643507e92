"""Runs of the properties and what they leave: Hypothesis runs, ``check``'s workers, replay files, findings.

===============  ==================================================================================
module           what it holds
===============  ==================================================================================
``profiles``     the Hypothesis profiles (``metadata-builders-dev``/``-ci``/``-nightly``), ``.metadata-builders/``
``runner``       one property's Hypothesis run (its focuses, counted and timed)
``check_runs``   ``check``'s runs in order or on worker processes
``reproduce``    a failure replayed on a fresh builder before its replay file is written
``findings``     known upstream findings, recognised by a failure's identity
``report``       tables, JUnit XML, replay files and the commands that replay them
===============  ==================================================================================
"""
