"""``python -m metadata_builders.families.dsa``: the DSA family's own small CLI until the main one wires
``--family dsa``.

    python -m metadata_builders.families.dsa check [--profile ci] [--modes decode,idle] [--only P1,P5]
                                                   [--max-examples N] [--failures-dir DIR]
    python -m metadata_builders.families.dsa mutants [--profile ci] [--only NAME,...] [--failures-dir DIR]
    python -m metadata_builders.families.dsa replay FILE.json

Exit 0 when everything holds (every mutant killed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys

from metadata_builders.families.dsa.check import (
    PROFILES,
    replay_file,
    run_check,
    run_mutants,
)


def _split(text: str | None) -> list[str] | None:
    return None if not text else [t.strip() for t in text.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metadata_builders.families.dsa",
                                     description="the DSA family (SGLang's DeepseekSparseAttnBackend) on the bundled "
                                                 "builder")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="every property on drawn batches of every mode")
    check.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    check.add_argument("--modes", help="comma-separated modes (default: all)")
    check.add_argument("--only", help="comma-separated properties (default: all)")
    check.add_argument("--max-examples", type=int, help="examples per mode and search (overrides the profile)")
    check.add_argument("--failures-dir", help="write each failing batch there as a replay file")
    mutants = sub.add_parser("mutants", help="run the family's mutant catalogue")
    mutants.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    mutants.add_argument("--only", help="comma-separated mutant names")
    mutants.add_argument("--failures-dir", help="write each killing batch there as a replay file")
    replay = sub.add_parser("replay", help="every property on one replay file")
    replay.add_argument("file")
    args = parser.parse_args(argv)
    if args.command == "check":
        report = run_check(args.profile, modes=_split(args.modes), only=_split(args.only),
                           max_examples=args.max_examples, failures_dir=args.failures_dir, progress=print)
        print(report.table())
        return 0 if report.ok else 1
    if args.command == "mutants":
        results = run_mutants(args.profile, only=_split(args.only), failures_dir=args.failures_dir, progress=print)
        killed = sum(r.killed for r in results)
        print(f"{killed}/{len(results)} mutants killed")
        return 0 if killed == len(results) else 1
    failures = replay_file(args.file)
    for failure in failures:
        print(f"{failure.prop} {failure.check}: {failure}")
    print("holds" if not failures else f"{len(failures)} propert{'y' if len(failures) == 1 else 'ies'} failed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
