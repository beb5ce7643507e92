"""Running a DSA builder under the harness: :class:`DSASubject`, the family's small audited wrapper.

It owns the whole call, as the core's ``AuditedBuilder`` does for DSV4 (with which it is to be merged): it
makes the inputs (eager: :func:`~.inputs.make_inputs`; graph: a :class:`~.runner.DSARunner`'s views), marks
them, snapshots them (P8), runs the builder under the core :class:`~metadata_builders.audit.DeviceAudit`, the
family's device model (:mod:`.device_model`: ``seqlens_expand``'s stores) and the copy watch
(:mod:`.transfers`), and returns a :class:`DSABuild` of plain data.  The graph path records with the core
:class:`~metadata_builders.harness.graph_recorder.GraphRecorder` and replays what it recorded.

Worked example::

    subject = DSASubject()                                  # the bundled builder on "cpu"
    subject.build(batch, DSAVariant("eager", "absent"))     # .syncs: one scalar read of seq_lens
    runner = subject.runner_for(batch, DSAVariant("graph", "given", "fused"), tiers=(1,))
    subject.capture_all(runner)                             # tiers largest first, dummy batch, out-graph syncs
    subject.replay(runner, batch)                           # .syncs == [], .fields as a replay leaves them
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsa import device_model, transfers
from metadata_builders.families.dsa.builder import DSABuilder
from metadata_builders.families.dsa.inputs import HOST_INPUTS, make_inputs
from metadata_builders.families.dsa.runner import BUCKETS, DSARunner
from metadata_builders.session import harness_session

if TYPE_CHECKING:
    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.inputs import DSAInputs
    from metadata_builders.families.dsa.variants import DSAVariant
    from metadata_builders.harness.graph_recorder import HostRead, RecordedGraph
    from metadata_builders.records import FaultRecord, SyncRecord

__all__ = ["DSABuild", "DSACapture", "DSASubject"]


@dataclass
class DSABuild:
    """One audited build (or replay) as plain data."""

    fields: dict[str, Any]
    """Every field the builder returned: lists (2-D for the page tables), ints, None."""
    dtypes: dict[str, str]
    """The tensor fields' dtypes (``int32``)."""
    syncs: list[SyncRecord]
    """Device-to-host reads during the call (a replay's: its out-graph work)."""
    faults: list[FaultRecord]
    """What the device models reported (the family's ``seqlens_expand`` stores, the core's gathers)."""
    copies: list[transfers.CopyRecord]
    """Host-to-device copies during the call."""
    launches: list[device_model.ExpandLaunch]
    """Every ``seqlens_expand_kernel`` launch as the device model saw it (P3, P6)."""
    input_changes: dict[str, tuple[Any, Any]]
    """Inputs (device tensors, caller host fields) the call changed: name -> (before, after) (P8)."""
    capture: DSACapture | None = None
    """On the graph path: the capture this replay ran on."""


@dataclass
class DSACapture:
    """One captured tier: its inputs (views of the runner's buffers), the builder's state, the recording."""

    inputs: DSAInputs
    """The tier's inputs: views of the runner's buffers, refilled before each replay."""
    state: Any
    """The builder's graph state (the runner bucket's backend)."""
    graph: RecordedGraph
    """The recorded in-graph work (none for DSA) and the captured tensors a replay leaves its values in."""
    host: dict[str, Any]
    """The capture's host fields (out-graph work's return)."""
    syncs: list[SyncRecord]
    """Device-to-host reads of the capture's out-graph work (allowed there; inside the recording the core
    recorder raises ``CaptureSync``, as a GPU refuses to capture a read)."""
    host_reads: list[HostRead]
    """Host memory the recorded work reads that is not graph state (P7)."""


@dataclass
class _Records:
    syncs: list[Any]
    faults: list[Any]
    launches: list[Any]
    copies: list[Any]


@contextlib.contextmanager
def _audited() -> Iterator[tuple[Any, _Records]]:
    """The core audit, the family's device model and copy watch, around one call."""
    from metadata_builders.audit import DeviceAudit

    with harness_session(), DeviceAudit() as audit, device_model.recording() as launches, \
            transfers.watching() as copies:
        yield audit, _Records(audit.host_syncs, audit.faults, launches, copies)


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def _dtypes(fields: dict[str, Any]) -> dict[str, str]:
    return {n: str(v.dtype).removeprefix("torch.") for n, v in fields.items() if hasattr(v, "dtype")}


class DSASubject:
    """A DSA builder under the harness: eager builds, runners, captures and replays, each audited."""

    def __init__(self, factory: Callable[..., Any] = DSABuilder, device: str = "cpu", name: str | None = None,
                 *, memo: bool = True) -> None:
        from metadata_builders.audit import device_handle

        self.factory = factory
        self.device = device
        self.inner = factory(device=device_handle(device))
        self.name = name or getattr(self.inner, "name", type(self.inner).__name__)
        self._memo: dict[tuple[Any, Any], DSABuild] | None = {} if memo else None
        self._runners: dict[tuple[Any, ...], DSARunner] = {}
        self.history: list[DSABatch] = []
        """Every batch built on this subject, oldest first (P9's histories)."""

    def fresh(self) -> DSASubject:
        """A freshly constructed twin: same factory and device, no runner, no history, no memo."""
        return DSASubject(self.factory, self.device, self.name, memo=self._memo is not None)

    # -- builds -----------------------------------------------------------------------------------

    def build(self, batch: DSABatch, variant: DSAVariant) -> DSABuild:
        """``batch`` along ``variant``: eager, or a replay on this subject's runner of the batch's bucket."""
        key = (batch, variant)
        if self._memo is not None and key in self._memo:
            return self._memo[key]
        if variant.path == "eager":
            result = self._eager(batch, variant)
        else:
            result = self.replay(self.runner_for(batch, variant), batch)
        if self._memo is not None:
            self._memo[key] = result
        return result

    def _eager(self, batch: DSABatch, variant: DSAVariant) -> DSABuild:
        from metadata_builders.audit import device_handle

        self.history.append(batch)
        inputs = make_inputs(batch, variant, device_handle(self.device))
        snapshot = inputs.snapshot()
        with _audited() as (_, records):
            raw = self.inner.build(inputs)
        return self._result(raw, records, inputs.changes_since(snapshot))

    def runner_for(self, batch: DSABatch, variant: DSAVariant, tiers: tuple[int, ...] = ()) -> DSARunner:
        """This subject's runner for ``batch``'s bucket and constants (made on first use, with ``tiers`` too; a
        batch whose tier exceeds the runner's ``max_bs`` gets a new runner, as a new server would)."""
        assert batch.graph is not None
        key = (BUCKETS[batch.mode], variant, batch.num_draft_tokens, batch.page_size, batch.index_topk,
               batch.num_slots, batch.width)
        runner = self._runners.get(key)
        wanted = (*batch.graph.tiers, batch.graph.padded_bs, *tiers)
        if runner is None or max(wanted) > runner.max_bs:
            runner = DSARunner.for_batch(batch, variant, self.device, wanted)
            self._runners[key] = runner
        elif not set(wanted) <= set(runner.tiers):
            runner.tiers = tuple(sorted(set(runner.tiers) | set(wanted), reverse=True))
        return runner

    def capture(self, runner: DSARunner, padded_bs: int, mode: str, draft_step: int | None = None) -> DSACapture:
        """Capture tier ``padded_bs`` on ``runner``'s dummy batch (out-graph work, then the recording)."""
        from metadata_builders.harness.graph_recorder import GraphRecorder

        inputs = runner.inputs_for(padded_bs, mode, draft_step)
        runner.fill_capture(inputs)
        inputs.in_capture = True
        inputs.mark()
        with _audited() as (audit, records):
            state = self.inner.graph_state(inputs)
            host = self.inner.out_graph(state, inputs)
            out_graph_syncs = list(records.syncs)
            recorder = GraphRecorder(audit, [state, inputs.tensors()])
            with recorder:
                recorded = self.inner.in_graph(state, inputs)
        inputs.in_capture = False
        graph = recorder.graph(recorded)
        capture = DSACapture(inputs, state, graph, host, out_graph_syncs, list(graph.host_reads))
        runner.captures[(padded_bs, draft_step)] = capture
        return capture

    def capture_all(self, runner: DSARunner, mode: str | None = None,
                    draft_step: int | None = None) -> list[DSACapture]:
        """Capture every tier of ``runner``, largest first, as upstream's runner does at startup."""
        mode = mode or runner.template.mode
        return [self.capture(runner, bs, mode, draft_step) for bs in runner.tiers
                if (bs, draft_step) not in runner.captures]

    def replay(self, runner: DSARunner, batch: DSABatch) -> DSABuild:
        """Refill ``batch``'s tier in place and replay: out-graph work in Python, then the recording."""
        assert batch.graph is not None
        self.history.append(batch)
        key = (batch.graph.padded_bs, batch.draft_step)
        capture = runner.captures.get(key) or self.capture(runner, *key[:1], batch.mode, batch.draft_step)
        inputs = capture.inputs
        runner.fill(inputs, batch)
        inputs.mark()
        snapshot = inputs.snapshot()
        with _audited() as (_, records):
            host = self.inner.out_graph(capture.state, inputs)
            capture.graph.replay()
        tensors = self._judged(capture.graph.fields, batch.draft_step if batch.mode == "draft_decode" else None)
        result = self._result({**tensors, **host}, records, inputs.changes_since(snapshot))
        result.capture = capture
        return result

    def prelude(self, page_table: Any, batch_size: int) -> Any:
        """The builder's consumer prelude (``kv_prelude``) on an indexer selection, unaudited (P10's consumer)."""
        return self.inner.kv_prelude(page_table, batch_size)

    @staticmethod
    def _judged(fields: dict[str, Any], child: int | None) -> dict[str, Any]:
        if child is None:
            return dict(fields)
        prefix = f"{child}/"
        return {name.removeprefix(prefix): t for name, t in fields.items() if name.startswith(prefix)}

    @staticmethod
    def _result(raw: dict[str, Any], records: _Records, changes: dict[str, tuple[Any, Any]]) -> DSABuild:
        fields = {name: _plain(value) for name, value in raw.items()}
        return DSABuild(fields, _dtypes(raw), list(records.syncs), list(records.faults), list(records.copies),
                        list(records.launches), changes)


def caller_fields_written(build: DSABuild) -> dict[str, tuple[Any, Any]]:
    """The caller's host fields a build changed (P8 holds them to :data:`~.fields.CALLER_WRITES`)."""
    return {name: change for name, change in build.input_changes.items() if name in HOST_INPUTS}
