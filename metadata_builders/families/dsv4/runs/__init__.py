"""DSV4's runs of its properties and what they leave: Hypothesis runs, ``check``'s workers, replay files,
findings.

===============  ==================================================================================
module           what it holds
===============  ==================================================================================
``check``        ``check``'s whole run, returned as one report object (``check_report``: its tables)
``runner``       one property's Hypothesis run (its focuses, counted and timed)
``check_runs``   ``check``'s runs in order or on worker processes
``reproduce``    a failure replayed on a fresh builder before its replay file is written
``findings``     known upstream findings, recognised by a failure's identity
``report``       tables, JUnit XML, replay files and the commands that replay them
===============  ==================================================================================

The Hypothesis profiles every family runs under are the core's (``metadata_builders.runs.profiles``).
"""
