"""What a builder declares on its class, read once and refused in one line when the harness cannot take it: the
declaration machinery every family's capabilities use (DSV4's: its ``builders.capabilities``)."""

from __future__ import annotations

from metadata_builders.errors import InvalidDeclaration

__all__ = ["declared_modes", "declaring"]


def declaring(cls: type, attribute: str) -> type | None:
    """The most derived class of ``cls``'s MRO that sets ``attribute`` itself (None: none does)."""
    return next((k for k in cls.__mro__ if attribute in vars(k)), None)


def declared_modes(cls: type, name: str, *, known: tuple[str, ...],
                   default: tuple[str, ...] = ("target_verify",)) -> tuple[str, ...]:
    """The modes ``cls`` declares (``modes = (...)`` on it or a base), validated against ``known`` (a family's
    batch model's modes); ``default`` when no class declares any (DSV4: target verify alone, said so in
    ``check``'s per-mode table).

    A declaration the harness cannot take is refused here, once, for every entry point (check, replay, the
    plugin, the gate): not a tuple or list of strings (``modes = "decode"`` would read as letters), empty (every
    property would be ``not applicable``: a green that judged nothing), or naming a mode the batch model does not
    know (``"draft_verify"`` would be dropped without a word).
    """
    owner = declaring(cls, "modes")
    if owner is None:
        return default
    value = vars(owner)["modes"]
    expected = f"a non-empty tuple of mode names, some of {known}"
    hint = f"docs/BUILDERS.md, 'Declaring modes'; leave modes out to be judged on {', '.join(default)}"
    if not isinstance(value, (tuple, list)) or not all(isinstance(m, str) for m in value):
        raise InvalidDeclaration(name, owner.__name__, "modes", expected, repr(value), hint)
    if not value:
        raise InvalidDeclaration(name, owner.__name__, "modes", expected, repr(value),
                                 "an empty declaration judges nothing; " + hint)
    unknown = [m for m in value if m not in known]
    if unknown:
        raise InvalidDeclaration(name, owner.__name__, "modes", expected, repr(value),
                                 f"{', '.join(map(repr, unknown))} is no mode of the batch model; " + hint)
    if len(set(value)) != len(value):
        raise InvalidDeclaration(name, owner.__name__, "modes", expected + ", each once", repr(value), hint)
    return tuple(value)
