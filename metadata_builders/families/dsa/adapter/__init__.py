"""The DSA family's adapter: the installed SGLang's own DSA metadata code on CPU (:class:`SGLangDSABuilder`).

``loading`` finds upstream's pieces and holds the shims (each named with why it does not change what is judged),
``double`` the backend double and the forward batch, ``builder`` the phases.  Importing this package imports
neither torch nor SGLang; the builder imports them when it is made.
"""

from __future__ import annotations

__all__ = ["SGLangDSABuilder"]


def __getattr__(name: str) -> object:
    if name == "SGLangDSABuilder":
        from metadata_builders.families.dsa.adapter.builder import SGLangDSABuilder

        return SGLangDSABuilder
    raise AttributeError(name)
