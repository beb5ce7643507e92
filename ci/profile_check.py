"""Where ``metadata-builders check`` spends its time: one run under cProfile, its exclusive time summed by room.

Usage (issue 44, docs/MEASURED.md "Where check's time goes")::

    python ci/profile_check.py --builder sglang --profile ci            # the arguments check takes
    python ci/profile_check.py --builder hip --profile ci --stats out.prof

``--workers 1`` is added (a worker process's time is invisible to a profile of the parent); the process start-up
a second worker costs is what ``--workers 2`` saves or adds, measured apart.  Every function's *own* time
(``tottime``: not its callees') is given to the first room of :data:`ROOMS` whose path fragment its file holds, so
the rooms add up to the run: the Triton interpreter's Python, SGLang's own code, torch's operators, the audit,
the reference, Hypothesis, pictures and replay files, imports.  A table, largest room first, with each room's
share and its three costliest functions.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import time
from collections import defaultdict

ROOMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("imports", ("<frozen importlib", "importlib/__init__", "<frozen zipimport")),
    ("Triton interpreter", ("/triton/",)),
    ("SGLang's own code", ("/sglang/",)),
    ("harness: the audit", ("metadata_builders/audit/", "metadata_builders/records")),
    ("harness: DSV4 reference", ("metadata_builders/families/dsv4/reference/",)),
    ("harness: the SGLang adapter", ("metadata_builders/families/dsv4/sglang/",)),
    ("harness: bundled hip builder", ("metadata_builders/families/dsv4/hip/",)),
    ("harness: properties", ("metadata_builders/properties/", "metadata_builders/families/dsv4/properties/")),
    ("harness: inputs, graph runner", ("metadata_builders/harness/", "metadata_builders/families/dsv4/builders/",
                                       "metadata_builders/families/dsv4/inputs",
                                       "metadata_builders/families/dsv4/graph")),
    ("harness: pictures, reports, runs", ("metadata_builders/families/dsv4/render/", "metadata_builders/runs/",
                                          "metadata_builders/families/dsv4/runs/", "metadata_builders/gate/",
                                          "metadata_builders/families/dsv4/gate/")),
    ("harness: DSV4 model (batch, strategies)", ("metadata_builders/families/dsv4/", "/strategies/")),
    ("harness: other", ("metadata_builders/",)),
    ("Hypothesis", ("/hypothesis/",)),
    ("torch (Python)", ("/torch/",)),
    ("torch operators (C++)", ("torch._C",)),
    ("Python stdlib and builtins", ("",)),
)
"""(room, path fragments): the first match wins, the last catches everything."""


def room_of(filename: str, function: str) -> str:
    if function == "<module>":
        return ROOMS[0][0]  # a module's body runs once, on import
    if filename == "~" and "torch" in function:
        return "torch operators (C++)"
    where = filename if filename != "~" else function
    for room, fragments in ROOMS:
        if any(fragment in where for fragment in fragments):
            return room
    return ROOMS[-1][0]


def table(stats: pstats.Stats, wall: float) -> str:
    own: dict[str, float] = defaultdict(float)
    top: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for (filename, line, function), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        room = room_of(filename, function)
        own[room] += tottime
        top[room].append((tottime, f"{os.path.basename(filename)}:{line} {function}"))
    total = sum(own.values())
    lines = [f"{'room':<42} {'seconds':>8} {'share':>6}  costliest functions (own time)"]
    for room, seconds in sorted(own.items(), key=lambda item: -item[1]):
        worst = ", ".join(f"{name} {t:.1f}s" for t, name in sorted(top[room], reverse=True)[:3])
        lines.append(f"{room:<42} {seconds:8.1f} {seconds / total:6.1%}  {worst}")
    lines.append(f"{'profiled (sum of own times)':<42} {total:8.1f}   wall {wall:.1f} s (profiling adds overhead)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from metadata_builders.cli import main as cli_main

    stats_path = None
    if "--stats" in argv:
        at = argv.index("--stats")
        stats_path = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    args = ["check", *argv, "--workers", "1"]
    profile = cProfile.Profile()
    start = time.monotonic()
    out = io.StringIO()
    stdout, sys.stdout = sys.stdout, out
    try:
        code = profile.runcall(cli_main, args)
    finally:
        sys.stdout = stdout
    wall = time.monotonic() - start
    print(out.getvalue().rstrip().splitlines()[-1] if out.getvalue().strip() else "(check printed nothing)")
    if stats_path:
        profile.dump_stats(stats_path)
    print(f"metadata-builders {' '.join(args)}: exit {code}")
    print(table(pstats.Stats(profile), wall))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
