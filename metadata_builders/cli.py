"""``metadata-builders``: one command line, every family's commands behind it.

``--family NAME`` (default: the registry's first, DSV4) picks the family whose command line runs the rest of the
arguments (the family package's ``__main__.main``): DSV4's ``check``, ``replay``, ``variants``,
``gate``, ``mutants``, ``power``, ``bench``, ``verdicts``; the DSA family's ``check``, ``replay``, ``mutants``,
``gate``.  Exit codes are every family's: 0 all held (all mutants killed, the gate green), 1 a property failed (the
gate red), 2 bad input or a setup error, said in one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from metadata_builders.errors import MetadataBuildersError
from metadata_builders.families import DEFAULT_FAMILY, family_main, family_module, split_family

__all__ = ["main", "synopsis"]


def synopsis(width: int = 112) -> str:
    """The README's CLI synopsis: the default family's, made from its parsers (``tests/core/test_docs.py`` holds the
    README to it)."""
    return family_module(DEFAULT_FAMILY, "__main__").synopsis(width)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``metadata-builders`` on ``argv`` (the process's arguments when None)."""
    try:
        family, rest = split_family(sys.argv[1:] if argv is None else argv)
        return family_main(family, rest)
    except MetadataBuildersError as exc:
        print(f"metadata-builders: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # ``replay FILE | head -1``: the reader left; say nothing more (Python's own advice: point stdout at devnull).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
