"""Builders as every family finds and makes them (DESIGN.md section 4.7).

=================  ==============================================================================
module             what it holds
=================  ==============================================================================
``loading``        ``module:attr`` found, imported and constructed under the audit; one line on failure
``declarations``   what a builder declares on its class (``modes``), validated once
=================  ==============================================================================

A family's own builders -- its names, its audited wrapper, its capabilities -- live in its package (DSV4's:
its ``builders`` package; ``get_builder`` is the facade's).
"""
