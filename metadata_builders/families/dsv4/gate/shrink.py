"""The gate's replay examples shrink as ``check``'s do: the smallest failing corpus batch, made simpler while the
head still fails the same check on it.

``check``'s replay files are Hypothesis' shrunk counterexamples; the gate's corpus is drawn once and never
shrunk, so its smallest failing batch can still carry what the strategies draw to reach rare shapes (a ring of
429,496,728 rows, eight requests where one fails).  :func:`simpler` lists one-step simplifications of a batch,
each a valid batch or left out: the ring of ``unified_swa_window + num_draft_tokens - 1`` rows upstream sizes,
one request fewer, no graph tier, no cap, the tier without its pad rows, shorter prefixes, one draft token fewer,
the table cut to the slots and columns the batch uses.  :func:`shrink` takes the first that still fails, and
starts again from it, within a time budget.

Run as a module in a side's environment (the head's code, :mod:`~metadata_builders.families.dsv4.gate.sides`)::

    python -m metadata_builders.families.dsv4.gate.shrink BATCH.json OUT.json PROPERTY CHECK SECONDS

it shrinks with the side's builder (the predicate: the property fails with check id ``CHECK``, evaluated as the
gate evaluates a corpus batch) and writes the result; ``--holds`` instead exits 0 when the property does not fail
that check on the batch, 1 when it does (the base must still hold on the shrunk batch, or the gate keeps the
original).  Worked example: a P10 failure on 8 requests with a 429,496,728-row ring shrinks, in six steps, to one
request on a 6-row ring when the failure needs only one request's ring stores.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import GraphTier, VerifyBatch

__all__ = ["main", "shrink", "shrink_examples", "simpler"]

MAX_TRIES = 200
"""Candidates evaluated at most, whatever the time budget."""


def simpler(batch: VerifyBatch) -> Iterator[VerifyBatch]:
    """One-step simplifications of ``batch``, most simplifying first; each valid (an invalid one is skipped)."""
    for make in (_readable_ring, _eager, *(_without_request(i) for i in reversed(range(batch.bs))), _uncapped,
                 _no_pad_rows, _shorter_prefixes, _fewer_drafts, _trimmed_table):
        try:
            candidate = make(batch)
        except InvalidBatch:
            continue
        if candidate is not None and candidate != batch:
            yield candidate


def shrink(batch: VerifyBatch, fails: Callable[[VerifyBatch], bool], seconds: float) -> tuple[VerifyBatch, int]:
    """The simplest batch reached from ``batch`` through :func:`simpler` on which ``fails`` holds (greedy: the
    first simplification that still fails is taken, and the search starts again from it), and the steps taken."""
    deadline, tries, steps = time.monotonic() + seconds, 0, 0
    progress = True
    while progress and time.monotonic() < deadline and tries < MAX_TRIES:
        progress = False
        for candidate in simpler(batch):
            if time.monotonic() >= deadline or tries >= MAX_TRIES:
                break
            tries += 1
            if fails(candidate):
                batch, steps, progress = candidate, steps + 1, True
                break
    return batch, steps


# -- the simplifications --------------------------------------------------------------------------------------


def _locations(batch: VerifyBatch, seq_lens: list[int], slots: list[int], widths: list[int]) -> list[int]:
    """Each request's locations read from its table row (what the caller allocated its positions)."""
    return [batch.req_to_token[slot][s + j] for slot, s, w in zip(slots, seq_lens, widths) for j in range(w)]


def _widths(batch: VerifyBatch) -> list[int]:
    return list(batch.location_widths)


def _readable_ring(batch: VerifyBatch) -> VerifyBatch | None:
    geo = batch.geometry
    ring = geo.unified_swa_window + batch.num_draft_tokens - 1
    if geo.ring_size <= ring:
        return None
    import dataclasses

    return batch.replace(geometry=dataclasses.replace(geo, ring_size=ring))


def _eager(batch: VerifyBatch) -> VerifyBatch | None:
    return None if batch.graph is None or batch.mode == "idle" else batch.replace(graph=None)


def _without_request(index: int) -> Callable[[VerifyBatch], VerifyBatch | None]:
    def without(batch: VerifyBatch) -> VerifyBatch | None:
        if batch.bs < 2 or index >= batch.bs:
            return None
        widths = _widths(batch)
        start = sum(widths[:index])
        keep = [i for i in range(batch.bs) if i != index]
        changes: dict = dict(
            seq_lens=[batch.seq_lens[i] for i in keep], req_pool_indices=[batch.req_pool_indices[i] for i in keep],
            verify_lens=None if batch.verify_lens is None else [batch.verify_lens[i] for i in keep],
            out_cache_loc=list(batch.out_cache_loc[:start]) + list(batch.out_cache_loc[start + widths[index]:]))
        if batch.divergence is not None:
            import dataclasses

            lists = {name: [v for i, v in enumerate(values) if i != index] if values is not None and
                     len(values) == batch.bs else values
                     for name, values in dataclasses.asdict(batch.divergence).items()}
            changes["divergence"] = dataclasses.replace(batch.divergence, **lists)
        return batch.replace(**changes)

    return without


def _uncapped(batch: VerifyBatch) -> VerifyBatch | None:
    g = batch.graph
    return None if g is None or g.cap is None else batch.replace(graph=GraphTier(g.padded_bs, g.graph_num_tokens))


def _no_pad_rows(batch: VerifyBatch) -> VerifyBatch | None:
    g = batch.graph
    if g is None or g.padded_bs == batch.bs or batch.bs == 0:
        return None
    per_row = g.graph_num_tokens // g.padded_bs if batch.verify_lens is None else None
    tokens = batch.bs * per_row if per_row is not None else max(batch.num_real_tokens, g.graph_num_tokens - (
        g.padded_bs - batch.bs) * (g.cap or batch.num_draft_tokens))
    return batch.replace(graph=GraphTier(batch.bs, tokens, g.cap))


def _shorter_prefixes(batch: VerifyBatch) -> VerifyBatch | None:
    seq_lens = [max(1, s // 2) for s in batch.seq_lens]
    if seq_lens == list(batch.seq_lens):
        return None
    return batch.replace(seq_lens=seq_lens, out_cache_loc=_locations(batch, seq_lens, list(batch.req_pool_indices),
                                                                     _widths(batch)))


def _fewer_drafts(batch: VerifyBatch) -> VerifyBatch | None:
    from metadata_builders.families.dsv4.properties.sequences import with_draft_count

    return with_draft_count(batch, batch.num_draft_tokens - 1) if batch.mode != "idle" else None


def _trimmed_table(batch: VerifyBatch) -> VerifyBatch | None:
    slots = max([0, *batch.req_pool_indices]) + 1
    width = max([1, *(s + w + (batch.draft_step or 0) for s, w in zip(batch.seq_lens, _widths(batch)))])
    if batch.graph is not None:
        width = max(width, 1 + batch.graph.graph_num_tokens)  # pad rows' positions fit (validation says exactly)
    if slots >= batch.num_slots and width >= batch.max_context:
        return None
    table = [list(row[:width]) for row in batch.req_to_token[:slots]]
    return batch.replace(req_to_token=table)


# -- in the gate's parent: one child per side ----------------------------------------------------------------


def shrink_examples(verdicts: list, corpus: list[VerifyBatch], env_of: Callable[[str], dict[str, str]],
                    workdir: str, seconds: float) -> dict[str, tuple[VerifyBatch, int]]:
    """For each property with new failures, its smallest failing batch shrunk with the head's code and kept where
    the base still holds on it: property -> (batch, steps).  ``env_of(side)`` is a side's child environment."""
    import subprocess

    out: dict[str, tuple[VerifyBatch, int]] = {}
    for pv in verdicts:
        new = pv.examples.get("new") or []
        if not new or seconds <= 0:
            continue
        index, _, head = min(new, key=lambda e: (corpus[e[0]].size_key(), e[0]))
        if not head.check:
            continue
        given, shrunk = (os.path.join(workdir, f"shrink-{pv.prop}{name}.json") for name in ("", "-out"))
        with open(given, "w") as fh:
            fh.write(corpus[index].to_json())
        child = [sys.executable, "-m", "metadata_builders.families.dsv4.gate.shrink"]
        try:
            done = subprocess.run([*child, given, shrunk, pv.prop, head.check, str(seconds)], env=env_of("head"),
                                  cwd=workdir, capture_output=True, text=True, timeout=seconds * 3 + 120, check=False)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode != 0 or not os.path.exists(shrunk):
            continue
        with open(shrunk) as fh:
            found = json.load(fh)
        if not found["steps"]:
            continue
        batch = VerifyBatch.from_dict(found["batch"])
        with open(given, "w") as fh:
            fh.write(batch.to_json())
        try:
            base = subprocess.run([*child, "--holds", given, pv.prop, head.check], env=env_of("base"), cwd=workdir,
                                  capture_output=True, text=True, timeout=seconds + 300, check=False)
        except subprocess.TimeoutExpired:
            continue
        if base.returncode == 0:  # base holds there too: the shrunk batch is still what head breaks
            out[pv.prop] = (batch, found["steps"])
    return out


# -- in a side's environment ----------------------------------------------------------------------------------


def _fails(prop: str, check: str) -> Callable[[VerifyBatch], bool]:
    """The property fails ``check`` on a batch, evaluated as the gate evaluates one (this side's builder)."""
    from metadata_builders.families.dsv4.gate.evaluate import _outcomes, make_builder
    from metadata_builders.families.dsv4.gate.model import ENV_BUILDER, ENV_DEVICE
    from metadata_builders.families.dsv4.properties import PROPERTIES

    builder = make_builder(os.environ[ENV_BUILDER], os.environ.get(ENV_DEVICE, "cpu"))
    spec = next(p for p in PROPERTIES if p.name == prop)

    def fails(batch: VerifyBatch) -> bool:
        outcome = _outcomes([spec], builder, batch, 0)[0]
        return outcome.status == "failed" and outcome.check == check

    return fails


def main(argv: list[str] | None = None) -> int:
    """``BATCH.json OUT.json PROPERTY CHECK SECONDS`` (shrink), or ``--holds BATCH.json PROPERTY CHECK``."""
    from metadata_builders.harness import harness_session

    argv = list(argv if argv is not None else sys.argv[1:])
    with harness_session():
        if argv[0] == "--holds":
            _, path, prop, check = argv
            with open(path) as fh:
                return int(_fails(prop, check)(VerifyBatch.from_json(fh.read())))
        path, out, prop, check, seconds = argv
        with open(path) as fh:
            batch = VerifyBatch.from_json(fh.read())
        shrunk, steps = shrink(batch, _fails(prop, check), float(seconds))
    with open(out, "w") as fh:
        json.dump({"batch": shrunk.to_dict(), "steps": steps}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
