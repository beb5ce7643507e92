"""The property framework every family's properties run on (DESIGN.md section 4.7).

============  ===========================================================================================
module        what it holds
============  ===========================================================================================
``spec``      :class:`PropertySpec` (a family's property row), :func:`verdict`, :class:`PropertyResult`
``checks``    the check ids a failure carries (``"p5.replay_vs_fresh"``, ...): data findings match on
``notes``     :class:`Partial` notes (what a check could not judge) and the tallies of what it exercised
============  ===========================================================================================

A family's properties live in its package (DSV4's: its ``properties``); the public
``check_p*`` names are the facade's (``from metadata_builders import check_p1_reference``).
"""
