"""The nightly's verdict files: one per cell of the matrix (release x family x shard), merged into one summary.

A cell of the nightly (``ci/nightly.sh --release R --family F --shard i/n``) runs its share of the upstream
suite and writes, next to its JUnit XML, a machine-readable verdict file::

    {"schema": "metadata-builders/verdicts@1", "release": "0.5.23", "family": "dsv4", "shard": "1/2",
     "seconds": 412.0, "counts": {"held": 40, "failed": 1, "known-finding": 0, "skipped": 2},
     "rows": [{"id": "tests/dsv4/test_gate_sglang.py::test_pr_red", "status": "failed", "finding": null,
               "message": "first line of the failure"}, ...]}

A row's ``status`` is ``held`` (passed), ``failed`` (failed or errored: blocks), ``known-finding`` (failed
naming a known upstream finding, ``known finding F5``, docs/FINDINGS.md: listed, not blocking) or ``skipped``
(not judged, with the reason).  The merge (``metadata-builders verdicts merge FILE... [--markdown OUT]``, or
``python -m metadata_builders.gate.verdict_files merge ...``) checks every file, refuses two files for the same
cell or the same test in two shards (exit 2, naming the file and the field), and writes one summary in the
gate's Markdown format (a table per cell, what failed, what was not judged, the verdict line); exit 1 when
anything failed, as the gate does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metadata_builders.errors import MetadataBuildersError
from metadata_builders.families import FAMILIES

__all__ = ["SCHEMA", "STATUSES", "VerdictFileError", "add_cli", "from_junit", "load", "main", "markdown", "merge"]

SCHEMA = "metadata-builders/verdicts@1"
STATUSES = ("held", "failed", "known-finding", "skipped")
_FINDING = re.compile(r"known finding (F\d+[a-z]?)")
_SHARD = re.compile(r"^([1-9]\d*)/([1-9]\d*)$")


class VerdictFileError(MetadataBuildersError, ValueError):
    """A verdict file that is unreadable, malformed, or conflicts with another: the CLI exits 2."""

    def __init__(self, path: str, field: str, problem: str) -> None:
        self._data(field, None, None, problem)
        self.path = path
        super().__init__(f"{path}: {field}: {problem}")


def parse_shard(text: str, where: str = "--shard", field: str = "shard") -> tuple[int, int]:
    """``"2/3"`` -> (2, 3); anything else (``0/3``, ``4/3``, ``x``) a :class:`VerdictFileError`."""
    m = _SHARD.match(str(text))
    if not m or int(m.group(1)) > int(m.group(2)):
        raise VerdictFileError(where, field, f"{text!r} is not i/n with 1 <= i <= n")
    return int(m.group(1)), int(m.group(2))


def _row(case: ET.Element) -> dict[str, Any]:
    name = case.get("name", "")
    classname = case.get("classname", "")
    file = case.get("file")
    ident = f"{file}::{name}" if file else (f"{classname}::{name}" if classname else name)
    failed = case.find("failure")
    if failed is None:
        failed = case.find("error")
    skipped = case.find("skipped")
    if failed is not None:
        text = (failed.get("message") or "") + "\n" + (failed.text or "")
        found = _FINDING.search(text)
        first = next((line for line in text.splitlines() if line.strip()), "")
        return {"id": ident, "status": "known-finding" if found else "failed",
                "finding": found.group(1) if found else None, "message": first.strip()[:300]}
    if skipped is not None:
        return {"id": ident, "status": "skipped", "finding": None, "message": (skipped.get("message") or "")[:300]}
    return {"id": ident, "status": "held", "finding": None, "message": ""}


def from_junit(paths: Sequence[str], *, release: str, family: str, shard: str, seconds: float) -> dict[str, Any]:
    """A cell's verdict file from its JUnit XML files (pytest's ``--junit-xml``, ``check --junit-xml``)."""
    parse_shard(shard)
    if family not in FAMILIES:
        raise VerdictFileError("--family", "family", f"{family!r} is not one of {list(FAMILIES)}")
    rows = []
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as exc:
            raise VerdictFileError(path, "junit", f"unreadable JUnit XML ({exc})") from None
        rows += [_row(case) for case in root.iter("testcase")]
    counts = Counter(row["status"] for row in rows)
    return {"schema": SCHEMA, "release": release, "family": family, "shard": shard, "seconds": round(seconds, 1),
            "counts": {s: counts[s] for s in STATUSES}, "rows": rows}


def _check(path: str, data: Any) -> dict[str, Any]:
    """``data`` as a verdict file, or a :class:`VerdictFileError` naming ``path`` and the first wrong field."""
    if not isinstance(data, dict):
        raise VerdictFileError(path, "(top level)", "not a JSON object")
    if data.get("schema") != SCHEMA:
        raise VerdictFileError(path, "schema", f"{data.get('schema')!r}, expected {SCHEMA!r}")
    for key in ("release", "family", "shard"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise VerdictFileError(path, key, f"missing or not a string: {data.get(key)!r}")
    if data["family"] not in FAMILIES:
        raise VerdictFileError(path, "family", f"{data['family']!r} is not one of {list(FAMILIES)}")
    parse_shard(data["shard"], path)
    if not isinstance(data.get("seconds"), (int, float)) or data["seconds"] < 0:
        raise VerdictFileError(path, "seconds", f"not a non-negative number: {data.get('seconds')!r}")
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise VerdictFileError(path, "rows", "missing or not a list")
    seen: set[str] = set()
    for k, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise VerdictFileError(path, f"rows[{k}].id", "missing or not a string")
        if row.get("status") not in STATUSES:
            raise VerdictFileError(path, f"rows[{k}].status", f"{row.get('status')!r} is not one of {list(STATUSES)}")
        if row["id"] in seen:
            raise VerdictFileError(path, f"rows[{k}].id", f"{row['id']!r} appears twice")
        seen.add(row["id"])
    counts = data.get("counts")
    if not isinstance(counts, dict):
        raise VerdictFileError(path, "counts", "missing or not an object")
    actual = Counter(row["status"] for row in rows)
    for status in STATUSES:
        if counts.get(status, 0) != actual[status]:
            raise VerdictFileError(path, f"counts.{status}",
                                   f"says {counts.get(status, 0)}, the rows have {actual[status]}")
    return data


def load(path: str) -> dict[str, Any]:
    """One verdict file, checked."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise VerdictFileError(path, "(file)", f"unreadable ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise VerdictFileError(path, "(file)", f"not JSON ({exc.msg} at line {exc.lineno})") from None
    return _check(path, data)


@dataclass
class Cell:
    """One (release, family) of the matrix: its shards' rows together."""

    release: str
    family: str
    shards: dict[int, str]
    """Shard index -> the verdict file it came from."""
    of: int
    rows: list[tuple[str, dict[str, Any]]]
    """(shard "i/n", row) in file order."""
    seconds: float

    @property
    def counts(self) -> Counter:
        return Counter(row["status"] for _, row in self.rows)

    @property
    def missing(self) -> list[int]:
        return [i for i in range(1, self.of + 1) if i not in self.shards]


def merge(paths: Sequence[str]) -> list[Cell]:
    """Every verdict file checked and grouped by (release, family), in release then family order."""
    if not paths:
        raise VerdictFileError("verdicts merge", "FILE", "no verdict file given")
    cells: dict[tuple[str, str], Cell] = {}
    where: dict[tuple[str, str, str], str] = {}
    for path in paths:
        data = load(path)
        key = (data["release"], data["family"])
        index, of = parse_shard(data["shard"], path)
        cell = cells.setdefault(key, Cell(key[0], key[1], {}, of, [], 0.0))
        if of != cell.of:
            first = next(iter(cell.shards.values()))
            raise VerdictFileError(path, "shard", f"{data['shard']!r} splits {key[0]} {key[1]} into {of}, "
                                                  f"{first} into {cell.of}")
        if index in cell.shards:
            raise VerdictFileError(path, "shard", f"{key[0]} {key[1]} shard {data['shard']} is also in "
                                                  f"{cell.shards[index]}")
        cell.shards[index] = path
        for k, row in enumerate(data["rows"]):
            other = where.setdefault((*key, row["id"]), path)
            if other != path:
                raise VerdictFileError(path, f"rows[{k}].id", f"{row['id']!r} is also in {other} (same release "
                                                             "and family: the shards overlap)")
            cell.rows.append((data["shard"], row))
        cell.seconds += float(data["seconds"])
    return [cells[k] for k in sorted(cells, key=lambda k: (_version_key(k[0]), k[1]))]


def _version_key(release: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", release))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _summary(cell: Cell) -> str:
    counts, total = cell.counts, len(cell.rows)
    parts = []
    for status in ("failed", "known-finding", "skipped"):
        if counts[status]:
            label = "FAILED" if status == "failed" else status
            if status == "known-finding":
                found = Counter(row["finding"] for _, row in cell.rows if row["status"] == status)
                label = "known finding (" + ", ".join(f"{f} x{c}" for f, c in sorted(found.items())) + ")"
            parts.append(f"{label} {counts[status]}/{total}")
    return "; ".join(parts) or f"held {counts['held']}/{total}"


def verdict_line(cells: list[Cell]) -> str:
    """``nightly: RED (0.5.23 dsv4 failing) in 812s; not judged: ...``, like the gate's own line."""
    failing = [f"{c.release} {c.family}" for c in cells if c.counts["failed"]]
    missing = [f"{c.release} {c.family} shard {','.join(map(str, c.missing))}/{c.of}" for c in cells if c.missing]
    if failing:
        head = f"nightly: RED ({', '.join(failing)} failing)"
    elif not any(c.rows for c in cells):
        head = "nightly: NOTHING JUDGED (no test ran in any cell; not a verdict)"
    else:
        head = "nightly: GREEN (no failures)"
    line = f"{head} in {sum(c.seconds for c in cells):.0f}s"
    if missing:
        line += "; not judged: " + ", ".join(missing) + " (no verdict file)"
    return line


def markdown(cells: list[Cell]) -> str:
    """The merged summary in the gate's Markdown format: the table, what failed, what was not judged, the line."""
    failed = any(c.counts["failed"] for c in cells)
    icon = "🔴 RED" if failed else ("⚪ NOTHING JUDGED" if not any(c.rows for c in cells) else "🟢 GREEN")
    files = sum(len(c.shards) for c in cells)
    out = [f"## metadata-builders nightly: {icon}", "",
           (f"{len(cells)} release x family cells from {files} verdict files; "
            f"{sum(c.seconds for c in cells):.0f}s of machine time"), "",
           "| cell | shards | gate | verdicts (tests) |", "|---|---|---|---|"]
    for c in cells:
        shards = f"{len(c.shards)}/{c.of}" + (f" (missing {', '.join(map(str, c.missing))})" if c.missing else "")
        out.append(f"| {c.release} {c.family} | {shards} | {'BLOCKS' if c.counts['failed'] else 'ok'} | "
                   f"{_cell(_summary(c))} |")
    fails = [(c, shard, row) for c in cells for shard, row in c.rows if row["status"] == "failed"]
    if fails:
        out += ["", "### Failed", ""]
        out += [f"- **{c.release} {c.family}** shard {shard}: `{row['id']}`" + (f": {_cell(row['message'])}"
                if row.get("message") else "") for c, shard, row in fails]
    out += ["", "### Not judged", ""]
    spots = [f"- **{c.release} {c.family}**: shard(s) {', '.join(map(str, c.missing))} of {c.of} wrote no verdict "
             "file" for c in cells if c.missing]
    spots += [f"- **{c.release} {c.family}**: {c.counts['skipped']} test(s) skipped" for c in cells
              if c.counts["skipped"]]
    out += spots or ["Nothing: every cell ran in full."]
    known = [(c, row) for c in cells for _, row in c.rows if row["status"] == "known-finding"]
    if known:
        out += ["", "### Known findings (not blocking)", ""]
        out += [f"- **{c.release} {c.family}** `{row['id']}`: {row['finding']}" for c, row in known]
    out += ["", f"`{verdict_line(cells)}`", ""]
    return "\n".join(out)


def _cmd_merge(args: argparse.Namespace) -> int:
    cells = merge(args.files)
    text = markdown(cells)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as fh:
            fh.write(text)
    if os.environ.get("GITHUB_STEP_SUMMARY") and args.markdown != os.environ["GITHUB_STEP_SUMMARY"]:
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as fh:
            fh.write(text)
    print(verdict_line(cells))
    return 1 if any(c.counts["failed"] for c in cells) else 0


def _cmd_write(args: argparse.Namespace) -> int:
    data = from_junit(args.junit, release=args.release, family=args.family, shard=args.shard, seconds=args.seconds)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")
    print(f"{args.out}: " + ", ".join(f"{s} {n}" for s, n in data["counts"].items()))
    return 0


def add_cli(sub: Any) -> None:
    """Register ``verdicts`` (``write`` and ``merge``) on the CLI's subparsers."""
    p = sub.add_parser("verdicts", help="the nightly's verdict files: write one from JUnit, merge several",
                       description=__doc__.split("\n\n")[0])
    actions = p.add_subparsers(dest="action", required=True, metavar="write|merge")
    w = actions.add_parser("write", help="a cell's verdict file from its JUnit XML")
    w.add_argument("--junit", nargs="+", required=True, metavar="XML", help="JUnit XML files of the cell")
    w.add_argument("--release", required=True, help="the SGLang release the cell ran")
    w.add_argument("--cell-family", dest="family", required=True, choices=FAMILIES,
                   help="the cell's backend family (not --family: that one picks the CLI's family)")
    w.add_argument("--shard", default="1/1", metavar="I/N", help="this cell's shard (default 1/1)")
    w.add_argument("--seconds", type=float, default=0.0, help="the cell's wall time")
    w.add_argument("--out", required=True, metavar="FILE")
    w.set_defaults(func=_cmd_write)
    m = actions.add_parser("merge", help="merge verdict files into one summary; exit 1 if any test failed")
    m.add_argument("files", nargs="+", metavar="FILE")
    m.add_argument("--markdown", default=None, metavar="OUT", help="write the Markdown summary here too "
                                                                   "(and to $GITHUB_STEP_SUMMARY when set)")
    m.set_defaults(func=_cmd_merge)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metadata_builders.gate.verdict_files")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["verdicts", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except MetadataBuildersError as exc:
        print(f"metadata-builders: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
