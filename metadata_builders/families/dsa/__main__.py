"""The DSA family's command line: ``metadata-builders check|replay|mutants --family dsa`` (the main CLI hands the
arguments here), or ``python -m metadata_builders.families.dsa``.

    metadata-builders check --family dsa [--builder dsa-torch|sglang|module:attr] [--profile dev|ci|nightly]
                            [--modes decode,idle] [--properties P1,P5] [--max-examples N] [--failures-dir DIR]
    metadata-builders mutants --family dsa [--profile ci] [--only NAME,...] [--failures-dir DIR]
    metadata-builders replay FILE.json --family dsa [--builder NAME] [--properties P1,P5]
    metadata-builders gate --family dsa --base REF [--head REF] [--repo PATH] [--profile ci|dev]
                           [--modes M,..] [--properties P1,P5] [--max-examples N] [--failures-dir DIR]

``--builder``: ``dsa-torch`` (the bundled torch builder, the default), ``sglang`` (the installed SGLang's own
``DeepseekSparseAttnBackend``, docs/DSA.md) or ``module:attr`` (a factory ``f(device=...)``).  Exit 0 when every
property holds (every mutant killed), 1 when one fails, 2 on bad input.  ``gate``: 0 green, 1 red, 2 nothing judged
or a side that cannot run (``gate.py``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from metadata_builders.errors import BuilderNotFound, MetadataBuildersError
from metadata_builders.families.dsa.check import PROFILES, release_of, replay_file, run_check, run_mutants
from metadata_builders.families.dsa.findings import known_finding

BUILDERS = ("dsa-torch", "sglang")
"""The names ``--builder`` knows besides ``module:attr``."""


def _split(text: str | None) -> list[str] | None:
    return None if not text else [t.strip() for t in text.split(",") if t.strip()]


def resolve_builder(name: str | None, device: str = "cpu") -> Callable[..., Any] | None:
    """The factory ``--builder NAME`` names (None: the bundled builder).

    A ``module:attr`` factory is made once here, so a factory that cannot make a builder, a builder without
    ``build``, or a ``modes`` declaration the family cannot take (empty, a string, an unknown mode: a green that
    judged nothing) is one line and exit 2 before anything runs, as on the DSV4 family.
    """
    if name in (None, "dsa-torch"):
        return None
    if name == "sglang":
        from metadata_builders.families.dsa.adapter import SGLangDSABuilder

        return SGLangDSABuilder
    if ":" not in (name or ""):
        raise BuilderNotFound(name, 'expected "dsa-torch", "sglang" or "module:attr" (the DSA family)')
    from metadata_builders.builders.declarations import declared_modes
    from metadata_builders.builders.loading import construct_named, load_factory
    from metadata_builders.families.dsa.batch import MODES

    factory = load_factory(name)
    builder = construct_named(name, factory, device)
    if not callable(getattr(builder, "build", None)):
        raise BuilderNotFound(name, f"it made a {type(builder).__name__}, which has no build(inputs, variant)")
    declared_modes(type(builder), name, known=MODES, default=MODES)
    return factory


def subject(name: str | None, device: str = "cpu") -> Any:
    """The builder ``name`` names (``resolve_builder``), audited as ``check`` audits it: the pytest plugin's
    ``builder`` fixture under ``--mb-family dsa`` (docs/examples/test_my_dsa_builder.py)."""
    from metadata_builders.families.dsa.check import subject_factory

    return subject_factory(resolve_builder(name, device), device)()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metadata-builders (--family dsa)",
                                     description="the DSA family (SGLang's DeepseekSparseAttnBackend)")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="every property on drawn batches of every mode")
    check.add_argument("--builder", help="dsa-torch (default), sglang, or module:attr")
    check.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    check.add_argument("--device", default="cpu")
    check.add_argument("--modes", help="comma-separated modes (default: all)")
    check.add_argument("--properties", "--only", dest="only", help="comma-separated properties (default: all)")
    check.add_argument("--max-examples", type=int, help="examples per mode and search (overrides the profile)")
    check.add_argument("--failures-dir", help="write each failing batch there as a replay file")
    check.add_argument("--json", help="also write the verdicts there as JSON (what the gate compares)")
    mutants = sub.add_parser("mutants", help="run the family's mutant catalogue on the bundled builder")
    mutants.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    mutants.add_argument("--only", help="comma-separated mutant names")
    mutants.add_argument("--failures-dir", help="write each killing batch there as a replay file")
    gate = sub.add_parser("gate", help="base against head on an SGLang checkout: red on what the head breaks")
    gate.add_argument("--base", required=True, help="the ref to compare against (e.g. origin/main)")
    gate.add_argument("--head", help="the ref under review (default: the checkout as it is)")
    gate.add_argument("--repo", default=".", help="the SGLang checkout (default: the current directory)")
    gate.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    gate.add_argument("--modes", help="comma-separated modes (default: all)")
    gate.add_argument("--properties", "--only", dest="only", help="comma-separated properties (default: all)")
    gate.add_argument("--max-examples", type=int, help="examples per mode and search (overrides the profile)")
    gate.add_argument("--failures-dir", help="the new failures' replay files (default: build/metadata-builders/"
                                             "failures under --repo)")
    replay = sub.add_parser("replay", help="every property on one replay file")
    replay.add_argument("file")
    replay.add_argument("--builder", help="dsa-torch (default), sglang, or module:attr")
    replay.add_argument("--device", default="cpu")
    replay.add_argument("--properties", "--only", dest="only", help="comma-separated properties (default: all)")
    return parser


def _write_json(path: str, report: Any) -> None:
    """``report.to_dict()`` and where ``sglang`` was imported from (the gate checks it is the side's tree)."""
    import json

    data = report.to_dict()
    module = sys.modules.get("sglang")
    data["sglang"] = getattr(module, "__file__", None)
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1)


def _run(args: argparse.Namespace) -> int:
    if args.command == "check":
        report = run_check(args.profile, builder=resolve_builder(args.builder, args.device), device=args.device,
                           modes=_split(args.modes), only=_split(args.only), max_examples=args.max_examples,
                           failures_dir=args.failures_dir, progress=print)
        print(report.table())
        if args.json:
            _write_json(args.json, report)
        return 0 if report.ok else 1
    if args.command == "mutants":
        results = run_mutants(args.profile, only=_split(args.only), failures_dir=args.failures_dir, progress=print)
        killed = sum(r.killed for r in results)
        print(f"{killed}/{len(results)} mutants killed")
        return 0 if killed == len(results) else 1
    if args.command == "gate":
        from metadata_builders.families.dsa.gate import main as gate_main

        return gate_main(args)
    builder = resolve_builder(args.builder, args.device)
    failures = replay_file(args.file, builder=builder, device=args.device, only=_split(args.only))
    release = release_of(builder, args.device) if failures else None
    known = [known_finding(failure.check, release) for failure in failures]
    for failure, finding in zip(failures, known):
        print(f"{'known ' + finding + ' ' if finding else ''}{failure.prop} {failure.check}: {failure}")
    unknown = sum(finding is None for finding in known)
    print("holds" if not failures else f"{len(failures)} propert{'y' if len(failures) == 1 else 'ies'} failed"
          + (f" ({len(failures) - unknown} known finding(s))" if unknown < len(failures) else ""))
    return 0 if not unknown else 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except MetadataBuildersError as exc:
        print(f"metadata-builders: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
