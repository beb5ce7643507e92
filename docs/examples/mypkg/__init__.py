"""A package of your own, as a backend engineer would write it: ``builders.py`` holds a builder that replaces one
stage of the bundled ``hip`` builder (docs/BUILDERS.md, "Replacing one stage").  Run from ``docs/examples``::

    metadata-builders check --builder mypkg.builders:MyRingBuilder
"""
