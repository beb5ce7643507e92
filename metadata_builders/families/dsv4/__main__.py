"""The DSV4 family's command line: check, replay, variants, gate, mutants, power, bench, verdicts.

``metadata-builders`` (:mod:`metadata_builders.cli`) hands it every command line that names no other family; ``python
-m metadata_builders.families.dsv4`` runs it too.  Every subcommand is registered from one list,
:data:`SUBCOMMANDS`; the tools (``mutants``, ``power``, ``bench``) live in the family's ``mutants`` and ``tools``.

Exit codes: 0 all properties held / all mutants killed; 1 a property failed (or
a mutant survived); 2 bad usage or input (an unreadable or invalid batch file,
an unknown builder).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Sequence

from metadata_builders.devices import DEVICE_HELP, usable_device
from metadata_builders.errors import ModeNotBuilt, UsageError
from metadata_builders.families import DEFAULT_FAMILY, FAMILIES, FAMILY_HELP
from metadata_builders.families.dsv4 import gate, mutants
from metadata_builders.families.dsv4.batch import Geometry, GraphTier, VerifyBatch
from metadata_builders.families.dsv4.builders import get_builder
from metadata_builders.families.dsv4.reference import expected_faults, expected_host_syncs, verify_extension
from metadata_builders.families.dsv4.runs.check import check, select_properties
from metadata_builders.families.dsv4.runs.check_report import switch_lines, sync_fault_table
from metadata_builders.families.dsv4.runs.report import format_table
from metadata_builders.families.dsv4.tools import bench, power
from metadata_builders.families.dsv4.variants import BUILT_MODES, divergence_applies, variants_for
from metadata_builders.gate import verdict_files

__all__ = ["main"]


def _out(text: str = "") -> None:
    print(text, flush=True)


# -- check ---------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    """Every property on ``--builder`` (:func:`metadata_builders.families.dsv4.runs.check.check`), its lines printed
    here."""
    return check(args, _out).code


# -- replay ------------------------------------------------------------------------------------


def _load_batch(path: str) -> tuple[VerifyBatch, list[VerifyBatch], str | None, str | None, bool]:
    """The batch of a replay file, the history to build first (``meta.history``), its why, its builder, and whether
    ``check`` marked it as not reproducing on a fresh builder (``meta.reproduces_on_fresh_builder: false``)."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as exc:
        raise UsageError("replay", "a readable batch file", f"cannot read {path}: {exc.strerror}") from exc
    batch = VerifyBatch.from_json(text)
    raw = json.loads(text)
    meta = raw.get("meta") if isinstance(raw.get("meta"), dict) else {}
    history = [VerifyBatch.from_dict(d) for d in meta.get("history", [])]
    builder = meta.get("builder") if isinstance(meta.get("builder"), str) else None
    return batch, history, raw.get("why"), builder, meta.get("reproduces_on_fresh_builder") is False


_NOT_REPRODUCED = ("NOT REPRODUCED when written: check saw this batch fail, but a fresh builder did not fail on it "
                   "(not even after the batches built before it); a green here is no verdict")


def cmd_replay(args: argparse.Namespace) -> int:
    from metadata_builders.families.dsv4.properties import run_all
    from metadata_builders.families.dsv4.properties.state import play_history

    args.device = usable_device(args.device)
    batch, history, why, written_for, unreproduced = _load_batch(args.file)
    if batch.mode not in BUILT_MODES:  # said once, before any builder is blamed for it
        raise ModeNotBuilt(batch.mode, BUILT_MODES)
    if args.builder is None:
        args.builder = written_for or "hip"
        whose = " (the file's meta.builder)" if written_for else " (the default; the file names no builder)"
    else:
        whose = "" if written_for in (None, args.builder) else (
            f" -- NOTE: the file was written for builder {written_for}; pass --builder {written_for} to replay it "
            "as found")
    builder = get_builder(args.builder, args.device)
    _out(f"replay {args.file} with builder={args.builder}{whose}")
    if unreproduced:
        _out(_NOT_REPRODUCED)
    if why:
        _out(f"why: {why}")
    _out(f"batch: {batch.describe()}, max_context={batch.max_context}")
    for line in switch_lines(builder, why=True):
        _out(line)
    if history:
        _out(f"history: building {len(history)} earlier batch(es) first, as when the failure was found: "
             + "; ".join(b.describe() for b in history))
        play_history(builder, history)
    results = run_all(builder, batch, select_properties(args.properties))
    rows, failures, notes = [], [], []
    for name, result in results.items():
        if result.failure is not None:
            rows.append([name, "FAILED"])
            failures.append(result.failure)
        elif result.status in ("partial", "not applicable"):
            rows.append([name, f"{result.status} ({result.why})"])
        else:
            rows.append([name, "held" if not result.notes else f"held, {len(result.notes)} note(s) below"])
        notes += [f"{name}: {n}" for n in result.notes if n != result.why]
    _out(format_table(["property", "result"], rows))
    for failure in failures:
        _out()
        _out(f"{failure.prop} FAILED (mode {batch.mode}) [{failure.variant}]: {failure.message}")
        if failure.field is not None:
            _out(f"  field {failure.field}, index {failure.index}: expected {failure.expected!r}, "
                 f"actual {failure.actual!r}")
    for note in notes:
        _out(f"note: {note}")
    _out()
    _out(sync_fault_table(builder, batch))
    if args.png or args.html:
        from metadata_builders.families.dsv4.render import analyse, render_html, render_png

        analysis = analyse(batch, args.builder, args.device, failure=failures[0] if failures else None,
                           history=history)
        if args.png:
            render_png(batch, args.png, analysis=analysis)
            _out(f"picture: {args.png}")
        if args.html:
            render_html(batch, args.html, analysis=analysis)
            _out(f"page: {args.html}")
    if unreproduced and not failures:
        _out()
        _out(f"{_NOT_REPRODUCED}: exit 1, as the failure check saw is not shown fixed (docs/FAILURES.md section 4)")
    return 1 if failures or unreproduced else 0


# -- variants ----------------------------------------------------------------------------------


def _representative_batches() -> list[tuple[str, VerifyBatch]]:
    width, pool = 16, 64
    table = [[(s * width + c) % (pool - 1) for c in range(width)] for s in range(4)]
    base = dict(
        seq_lens=[4, 6], req_pool_indices=[1, 2], num_draft_tokens=3, req_to_token=table,
        full_to_swa=list(range(pool - 1)) + [-1], geometry=Geometry(4, 4, 6, 4, 4),
    )
    out = []
    for dspark in (False, True):
        algo = "DSpark" if dspark else "EAGLE"
        uni = VerifyBatch(verify_lens=None, out_cache_loc=list(range(6)), is_dspark=dspark,
                          graph=GraphTier(3, 9, None), **base)
        rag = VerifyBatch(verify_lens=[2, 1], out_cache_loc=list(range(3)), is_dspark=dspark,
                          graph=GraphTier(3, 6, None), **base)
        capped = rag.replace(graph=GraphTier(3, 8, 2))
        out += [(f"uniform {algo}", uni), (f"ragged {algo}", rag), (f"ragged {algo}, capped tier", capped)]
    return out


def cmd_variants(args: argparse.Namespace) -> int:
    rows = []
    for name, batch in _representative_batches():
        for variant in variants_for(batch):
            if "capped" in name and variant.path == "eager":
                continue
            rows_ = verify_extension(batch, variant)
            syncs = expected_host_syncs(batch, variant, rows_)
            diverged = batch.replace(divergence=_run_ahead(batch))
            exposure = "none"
            if divergence_applies(diverged, variant):
                faults = expected_faults(diverged, variant)
                exposure = "FAULTS if device lengths diverge" if faults else "no fault; wrong metadata if diverged"
            rows.append([name, variant.path, variant.mirror if not batch.is_ragged else "-",
                         variant.layout_total if batch.is_ragged and variant.path == "eager" else "-",
                         variant.gate, "yes" if rows_.used_output_size else "no",
                         len(syncs), ", ".join(s.op for s in syncs) or "-", exposure])
    _out(format_table(
        ["batch", "path", "mirror", "layout_total", "gate", "output_size", "syncs", "sync ops", "fault exposure"], rows
    ))
    _out()
    _out("Sync contract: one D2H read each for mirror=tolist (a copy of seq_lens), a ragged total read from the\n"
         "device (a scalar of verify_lens), and a token map without output_size; none otherwise. Fault exposure: a\n"
         "map that trusts a host count while the device lengths diverge (the builder's async H2D copy of host-staged\n"
         "lengths). A ragged layout's total is read from the very device lengths the map reads, so it cannot fault.")
    return 0


def _run_ahead(batch: VerifyBatch):
    from metadata_builders.families.dsv4.batch import Divergence

    lens = list(batch.extend_lens)
    if batch.is_ragged:
        lens[-1] = 1 if lens[-1] > 1 else 2  # a ragged device layout stays a layout
    else:
        lens[-1] += 1
    return Divergence(lens)


# -- main ----------------------------------------------------------------------------------------


def _common(p: argparse.ArgumentParser, builder_default: str | None = "hip") -> None:
    """The options check and replay share: which builder, on which device, which properties."""
    p.add_argument("--builder", default=builder_default,
                   help='"hip" (bundled), "reference", "sglang" (installed SGLang) or "module:attr"; default: '
                        + ("hip" if builder_default
                           else "the builder the file was written for (meta.builder), else hip"))
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--properties", default=None, help="comma-separated subset, e.g. P1,P6 (default: all)")
    p.add_argument("--family", default=DEFAULT_FAMILY, choices=FAMILIES, help=FAMILY_HELP)


def _add_check(sub: Any) -> None:
    """Register ``check``."""
    check = sub.add_parser("check", help="run every property with Hypothesis; exit 0 only if all hold")
    _common(check)
    check.add_argument("--profile", default="dev", choices=["dev", "ci", "nightly"],
                       help="dev: quick, local example database; ci: derandomized, reproducible; nightly: large")
    check.add_argument("--max-examples", type=int, default=None, help="override the profile's examples per property")
    check.add_argument("--junit-xml", default=None, metavar="PATH", help="write one JUnit testcase per property")
    check.add_argument("--failures-dir", default=None, metavar="DIR",
                       help="where each failing property's shrunk batch is written as a replay file (default "
                            ".metadata-builders/failures: one hidden folder that git ignores)")
    check.add_argument("--github-artifacts", default=None, metavar="OWNER/REPO",
                       help="also read CI's Hypothesis database (read-only GitHubArtifactDatabase) to replay what "
                            "CI found")
    check.add_argument("--show-coverage", action="store_true", help="print boundary hits per 100 examples")
    check.add_argument("--workers", "-n", default="auto",
                       help="processes running properties side by side (default auto: one per core on CPU, 1 on a GPU)")
    check.set_defaults(func=cmd_check)


def _add_replay(sub: Any) -> None:
    """Register ``replay``."""
    replay = sub.add_parser("replay", help="run every property on one batch file; exit 1 on any failure")
    replay.add_argument("file", help="a replay file (schema metadata-builders/verify-batch@1)")
    _common(replay, builder_default=None)
    replay.add_argument("--png", default=None, metavar="OUT.png", help="draw the batch and its disagreements")
    replay.add_argument("--html", default=None, metavar="OUT.html",
                        help="self-contained HTML picture with hover details")
    replay.set_defaults(func=cmd_replay)


def _add_variants(sub: Any) -> None:
    """Register ``variants``."""
    variants = sub.add_parser("variants", help="list paths/variants with their expected syncs and fault exposure",
                              description="Every build recipe (path, mirror, layout total, gate) of six representative "
                                          "batches, with the host syncs the contract allows and where a diverging "
                                          "device length would fault. Takes no options.")
    variants.set_defaults(func=cmd_variants)


SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (
    _add_check, _add_replay, _add_variants, gate.add_cli, mutants.add_cli, power.add_cli, bench.add_cli,
    verdict_files.add_cli,
)
"""Every subcommand's registrar, in ``--help`` order; each adds exactly one subparser."""


def _version() -> str:
    """The package's own ``__version__``: an editable install's metadata keeps the version it was installed at."""
    import metadata_builders

    return metadata_builders.__version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="metadata-builders",
        description="Property-based correctness harness for SGLang DeepSeek-V4 HIP target-verify metadata builders.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in SUBCOMMANDS:
        register(sub)
    return parser


def synopsis(width: int = 112) -> str:
    """The README's CLI synopsis, made from the parsers themselves (``tests/core/test_docs.py`` holds the README to it):
    one entry per subcommand, each option as ``[--flag METAVAR]``, wrapped under the subcommand's name."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001 - argparse's own
    lines = []
    for name, command in sub.choices.items():
        parts = []
        for action in command._actions:  # noqa: SLF001 - argparse keeps its actions here
            if isinstance(action, argparse._HelpAction):  # noqa: SLF001
                continue
            if not action.option_strings:
                parts.append(action.metavar or action.dest.upper())
                continue
            flag = max(action.option_strings, key=len)
            if action.nargs == 0:
                parts.append(f"[{flag}]")
            elif action.choices:
                parts.append(f"[{flag} {'|'.join(map(str, action.choices))}]")
            else:
                parts.append(f"[{flag} {action.metavar or action.dest.upper()}]")
        head = f"metadata-builders {name:<8}"
        line = head
        for part in parts:
            if len(line) + 1 + len(part) > width and line.strip() != head.strip():
                lines.append(line)
                line = " " * len(head)
            line += " " + part
        lines.append(line)
    lines.append("metadata-builders --version")
    return "\n".join(line.rstrip() for line in lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The DSV4 family's command line on ``argv`` (the core's ``metadata-builders`` hands it every command line that
    names no other family: :func:`metadata_builders.cli.main`)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    return int(args.func(args))


if __name__ == "__main__":
    from metadata_builders.cli import main as _cli_main

    sys.exit(_cli_main(sys.argv[1:]))
