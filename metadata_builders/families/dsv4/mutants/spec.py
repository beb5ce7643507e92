"""One mutant as data: where it edits the bundled builder, the bug it models, the edit itself."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

__all__ = ["MutantSpec"]


@dataclass(frozen=True, slots=True)
class MutantSpec:
    """One mutant: where it edits ``hip.py``, what bug it models, and the edit itself."""

    name: str
    """Identifier, also the ``metadata_builders.families.dsv4.mutants:<name>`` factory."""
    stage: str
    """A function of :mod:`metadata_builders.families.dsv4.hip.pipeline`, ``HipBuilder.<method>``, ``compression.<fn>``
    (a function of :mod:`metadata_builders.families.dsv4.hip.compression`), ``low_ratios.<fn>``
    (:mod:`metadata_builders.families.dsv4.hip.low_ratios`) or ``decode.<fn>``
    (:mod:`metadata_builders.families.dsv4.hip.decode`)."""
    bug_class: str
    """The kind of bug, in a few words."""
    summary: str
    """What the edit does and what it breaks."""
    find: str
    """Source text of the stage, exactly as in ``hip.py``, that the mutant replaces (once)."""
    replace: str
    """The buggy text put in its place."""
    incident: str | None = None
    """The upstream incident or bug report it resembles, if one exists."""
    padding: str | None = None
    """The tier padding convention the mutant *declares* (None: the bundled builder's, ``pad_rows_only``).

    A mutant that changes the convention and declares the change is judged by the
    reference of its own convention: a mistake the specification would share,
    which only P10 (what the stores do) can see."""

    @property
    def docstring(self) -> str:
        """The factory's docstring: bug class, summary, incident, the diff."""
        text = f"Mutant of hip.{self.stage} -- {self.bug_class}.\n\n{self.summary}\n"
        if self.incident:
            text += f"\nResembles: {self.incident}\n"
        if self.padding:
            text += f"\nDeclares padding_convention = {self.padding!r}.\n"
        return text + "\n" + self.diff + "\n"

    @property
    def diff(self) -> str:
        """The edit as a two-sided diff (``-`` original, ``+`` mutant), indentation stripped."""
        old = textwrap.dedent(self.find).strip("\n").splitlines() or [""]
        new = textwrap.dedent(self.replace).strip("\n").splitlines() or ["(line removed)"]
        return "\n".join([f"- {line}" for line in old] + [f"+ {line}" for line in new])
