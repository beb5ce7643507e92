"""The gate end to end on real SGLang code: a miniature SGLang repository, base as released, heads planted.

Each branch plants one realistic regression of tests/_gate_plants.py (its table: branch, file, the route it breaks).
The gate runs both kernel routes of ``--builder sglang`` (metadata_builders/families/dsv4/builders/registry.py).
"""

from __future__ import annotations

import os
import subprocess

import pytest
from _gate_plants import (
    BACKEND,
    BACKEND_PLANTS,
    DISPATCHER_PLANTS,
    DRAFT_DECODE_PLANTS,
    DRAFT_EXTEND_PLANT,
    DSPARK_DRAFT_PLANT,
    GRAPH_PLANTS,
    KV_PLANT,
    MIRROR_PLANT,
    PREMERGE_GRAPH_PLANTS,
    RAGGED_KERNELS,
    STAGING_PLANT,
    STORE_KERNEL,
    STORE_KERNEL_PLANT,
    SWITCH_PLANTS,
    TORCH_FALLBACK_PLANT,
    UNPADDED_PLANT,
    Plant,
)

from metadata_builders.cli import main
from metadata_builders.gate.mini_repo import make_mini_repo

pytestmark = pytest.mark.sglang


def _plant_branch(git, repo: str, branch: str, plant: Plant) -> None:
    path = os.path.join(repo, "python", "sglang", *plant.path)
    with open(path) as fh:
        source = fh.read()
    git("checkout", "-q", "-b", branch, "main")
    with open(path, "w") as fh:
        fh.write(source.replace(plant.find, plant.replace, 1))
    git("commit", "-q", "-am", f"planted: {plant.what}")
    git("checkout", "-q", "main")


def _count(repo: str, plant: Plant) -> int:
    with open(os.path.join(repo, "python", "sglang", *plant.path)) as fh:
        return fh.read().count(plant.find)


@pytest.fixture(scope="module")
def planted_repo(tmp_path_factory):
    """(repo, {branch: plant}): ``main`` = the installed release, one branch per planted regression."""
    repo = str(tmp_path_factory.mktemp("sglang-mini"))
    make_mini_repo(repo)  # what ci/mini-sglang.sh makes: the release as installed on main
    backend, kernels = (os.path.join(repo, "python", "sglang", *path) for path in (BACKEND, RAGGED_KERNELS))

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", repo, "-c", "user.email=gate@test", "-c", "user.name=gate", *args],
                       check=True, capture_output=True)

    plants: dict[str, Plant] = {}
    with open(backend) as fh:
        source = fh.read()
    plants["pr"] = next(p for p in BACKEND_PLANTS if source.count(p.find) == 1)
    if source.count(MIRROR_PLANT.find) == 1:
        plants["pr-mirror"] = MIRROR_PLANT
    with open(kernels) as fh:
        fallback = fh.read()
    if fallback.count(TORCH_FALLBACK_PLANT.find) == 1:
        plants["pr-torch"] = TORCH_FALLBACK_PLANT
    plants.update({branch: plant for branch, plant in GRAPH_PLANTS.items() if _count(repo, plant) == 1})
    dispatcher = next((p for p in DISPATCHER_PLANTS if source.count(p.find) == 1), None)
    if dispatcher is not None:
        plants["pr-dispatcher"] = dispatcher
    if _count(repo, KV_PLANT) == 1:
        plants["pr-ring-stride"] = KV_PLANT
    if source.count(DRAFT_EXTEND_PLANT.find) == 1:
        plants["pr-draft-extend"] = DRAFT_EXTEND_PLANT
    if source.count(STAGING_PLANT.find) == 1:
        plants["pr-staging"] = STAGING_PLANT
    if source.count(UNPADDED_PLANT.find) == 1:
        plants["pr-unpadded"] = UNPADDED_PLANT
    if source.count(DSPARK_DRAFT_PLANT.find) == 1:
        plants["pr-dspark-draft"] = DSPARK_DRAFT_PLANT
    plants.update({branch: plant for branch, plant in DRAFT_DECODE_PLANTS.items() if _count(repo, plant) == 1})
    if os.path.exists(os.path.join(repo, "python", "sglang", *STORE_KERNEL)) and _count(repo, STORE_KERNEL_PLANT) == 1:
        plants["pr-store-kernel"] = STORE_KERNEL_PLANT
    plants.update({branch: plant for branch, plant in SWITCH_PLANTS.items() if _count(repo, plant) == 1})
    for branch, plant in plants.items():
        _plant_branch(git, repo, branch, plant)
    return repo, plants


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    """One gate cache for the module: base is evaluated once for every head."""
    return str(tmp_path_factory.mktemp("gate-cache"))


GATE_PER_KIND = "2"
"""Batches of each kind the chosen properties focus on: two, so every target-verify kind a plant needs (a compact
ragged tier whose tiers share ``bs``, DSpark's uniform graph) is reached whatever the other modes add.  A corpus
spread evenly instead (``--examples 12``) fell to one batch a kind once idle and the decode focuses of P7 and P10
came, and ``pr-runner-key`` went green: measured on the fresh-clone CI run of 2026-12-04."""


def _gate(repo: str, tmp_path, cache: str, head: str, *extra: str) -> int:
    return main(["gate", "--base", "main", "--head", head, "--repo", repo, "--builder", "sglang",
                 "--properties", "P1,P4", "--per-kind", GATE_PER_KIND, "--workers", "2", "--no-pictures",
                 "--cache-dir", cache, "--failures-dir", str(tmp_path / "failures"), *extra])


def _row(out: str, prop: str) -> str:
    return next(row for row in out.splitlines() if row.startswith(prop + " "))


def test_a_planted_regression_gates_red_naming_the_property(planted_repo, cache_dir, tmp_path, capsys) -> None:
    """Head with a builder regression: red, the expected property NEW, a replay file written."""
    repo, plants = planted_repo
    plant = plants["pr"]
    assert _gate(repo, tmp_path, cache_dir, "pr") == 1, plant.what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, plant.prop) and "NEW" in _row(out, plant.prop), out
    assert any(name.startswith(plant.prop + "-") for name in os.listdir(tmp_path / "failures"))


def test_a_bug_in_upstreams_torch_fallback_gates_red_on_the_torch_route(planted_repo, cache_dir, tmp_path,
                                                                          capsys) -> None:
    """``PaddedToBucket``'s torch fallback broken: the torch route blocks, the Triton route does not notice."""
    repo, plants = planted_repo
    if "pr-torch" not in plants:
        pytest.skip(f"the installed release has no {TORCH_FALLBACK_PLANT.find!r} to plant a bug in")
    plant = plants["pr-torch"]
    assert _gate(repo, tmp_path, cache_dir, "pr-torch") == 1, plant.what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P1-torch") and "NEW" in _row(out, "P1-torch"), out
    assert "BLOCKS" not in _row(out, "P1"), out
    replays = [n for n in os.listdir(tmp_path / "failures") if n.startswith("P1-torch-") and n.endswith(".json")]
    assert replays, out
    assert "--builder metadata_builders.families.dsv4.sglang:torch_route" in out


@pytest.mark.slow
def test_the_host_mirror_feeding_the_compress_plans_off_by_one_gates_red(planted_repo, cache_dir, tmp_path,
                                                                          capsys) -> None:
    """Issue 15's bug: the mirror arithmetic one short. Only the compress plans read it on the Triton route."""
    repo, plants = planted_repo
    if "pr-mirror" not in plants:
        pytest.skip(f"the installed release has no {MIRROR_PLANT.find!r} to plant a bug in")
    assert _gate(repo, tmp_path, cache_dir, "pr-mirror", "--properties", "P1,P2") == 1, MIRROR_PLANT.what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P1") and "NEW" in _row(out, "P1"), out
    replays = [n for n in os.listdir(tmp_path / "failures") if n.startswith("P1-") and n.endswith(".json")]
    assert any("plan" in open(tmp_path / "failures" / n).read() for n in replays), out


@pytest.mark.parametrize("branch", [b if b in PREMERGE_GRAPH_PLANTS else pytest.param(b, marks=pytest.mark.slow)
                                    for b in GRAPH_PLANTS])
def test_a_graph_replay_regression_gates_red_through_the_recorder(planted_repo, cache_dir, tmp_path, capsys,
                                                                 branch: str) -> None:
    """Issue 18's bugs in upstream's two graph phases: only a replay as a GPU runs it (recorded) sees them."""
    from metadata_builders.families.dsv4.sglang.releases import Capabilities, upstream_version

    repo, plants = planted_repo
    plant = GRAPH_PLANTS[branch]
    if branch not in plants:
        pytest.skip(f"the installed release has no {plant.find!r} to plant a bug in")
    if branch in ("pr-rebind", "pr-staged") and not Capabilities.of(upstream_version()).gate:
        pytest.skip(f"the installed release's target verify never takes the raw-verify route: {plant.what}")
    assert _gate(repo, tmp_path, cache_dir, branch, "--properties", "P5,P7") == 1, plant.what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, plant.prop) and "NEW" in _row(out, plant.prop), out


@pytest.mark.slow
def test_the_backends_own_pad_of_the_live_out_cache_loc_dropped_gates_red(planted_repo, cache_dir, tmp_path,
                                                                         capsys) -> None:
    """The runner hands the live, unpadded out_cache_loc at a replay, as upstream's does: a backend that drops its
    pad to the tier is red on P5 (it was green when the harness handed the static buffer)."""
    repo, plants = planted_repo
    if "pr-unpadded" not in plants:
        pytest.skip("the installed release has no such out-graph target-verify call to plant a bug in")
    assert _gate(repo, tmp_path, cache_dir, "pr-unpadded", "--properties", "P5") == 1, UNPADDED_PLANT.what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P5") and "NEW" in _row(out, "P5"), out


@pytest.mark.slow
def test_a_staging_buffer_reused_with_changing_values_gates_red(planted_repo, cache_dir, tmp_path, capsys) -> None:
    """One pinned buffer kept step to step and rewritten when DSpark's draft count changes: a stale asynchronous copy
    only consecutive builds show, red on P9 (its history ends with the other draft count)."""
    repo, plants = planted_repo
    if "pr-staging" not in plants:
        pytest.skip("the installed release has no _move_to_device to plant a bug in")
    assert _gate(repo, tmp_path, cache_dir, "pr-staging", "--properties", "P9") == 1, STAGING_PLANT.what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P9") and "NEW" in _row(out, "P9"), out


@pytest.mark.slow
def test_a_regression_in_upstreams_eager_dispatcher_gates_red(planted_repo, cache_dir, tmp_path, capsys) -> None:
    """The dispatcher chooses ``max_seq_len`` for every eager build: taken from the last request, the page table is
    cut short wherever the last request is not the longest. Red on P1 only because eager builds go through it."""
    repo, plants = planted_repo
    if "pr-dispatcher" not in plants:
        pytest.skip("the installed release has no dispatcher max_seq_len line to plant a bug in")
    assert _gate(repo, tmp_path, cache_dir, "pr-dispatcher", "--properties", "P1") == 1, plants["pr-dispatcher"].what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P1") and "NEW" in _row(out, "P1"), out


@pytest.mark.slow
def test_a_draft_extend_regression_gates_red(planted_repo, cache_dir, tmp_path, capsys) -> None:
    """A regression only draft extend runs: red on P1, and the per-mode table shows draft extend judged."""
    repo, plants = planted_repo
    if "pr-draft-extend" not in plants:
        pytest.skip("the installed release builds draft extend's lengths otherwise (0.5.18-0.5.21 stage them)")
    assert _gate(repo, tmp_path, cache_dir, "pr-draft-extend", "--properties", "P1") == 1
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P1") and "NEW" in _row(out, "P1"), out
    assert any(line.startswith("draft_extend ") for line in out.splitlines()), out


@pytest.mark.parametrize("branch", [pytest.param("pr-draft-decode-step", marks=pytest.mark.slow),
                                    pytest.param("pr-draft-decode-slice", marks=pytest.mark.slow),
                                    pytest.param("pr-draft-decode-children", marks=pytest.mark.slow)])
def test_a_draft_decode_regression_gates_red(planted_repo, cache_dir, tmp_path, capsys, branch: str) -> None:
    """A regression only the multi-step draft decode runs: red on its property, the per-mode table's draft-decode
    row present."""
    repo, plants = planted_repo
    plant = DRAFT_DECODE_PLANTS[branch]
    if branch not in plants:
        pytest.skip(f"the installed release has no {plant.find.strip()!r} to plant a bug in (0.5.20+)")
    assert _gate(repo, tmp_path, cache_dir, branch, "--properties", plant.prop) == 1, plant.what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, plant.prop) and "NEW" in _row(out, plant.prop), out
    assert any(line.startswith("draft_decode ") for line in out.splitlines()), out
    replays = [n for n in os.listdir(tmp_path / "failures") if n.startswith(plant.prop + "-") and n.endswith(".json")]
    assert any('"mode": "draft_decode"' in (tmp_path / "failures" / n).read_text() for n in replays), out


def test_the_release_against_itself_gates_green(planted_repo, cache_dir, tmp_path, capsys) -> None:
    """Head = base (both the release): green on both routes; whatever fails at both is listed as pre-existing."""
    repo, _ = planted_repo
    assert _gate(repo, tmp_path, cache_dir, "main") == 0
    out = capsys.readouterr().out
    assert "gate: GREEN" in out and _row(out, "P1-torch"), out


def test_the_release_against_itself_gates_green_on_recorded_replays(planted_repo, cache_dir, tmp_path,
                                                                   capsys) -> None:
    """The graph plants' other side: P5 and P7 on the corpus that reaches the raw-verify route, unplanted."""
    repo, _ = planted_repo
    assert _gate(repo, tmp_path, cache_dir, "main", "--properties", "P5,P7") == 0
    out = capsys.readouterr().out
    assert "gate: GREEN" in out and "BLOCKS" not in _row(out, "P5") and "BLOCKS" not in _row(out, "P7"), out


@pytest.mark.parametrize(("branch", "p1_blocks"), [pytest.param("pr-ring-stride", True, marks=pytest.mark.slow),
                                                   pytest.param("pr-store-kernel", False, marks=pytest.mark.slow)])
def test_a_regression_of_what_the_stores_do_gates_red_on_p10(planted_repo, cache_dir, tmp_path, capsys,
                                                             branch: str, p1_blocks: bool) -> None:
    """ROCm ATOM PR #817's bug in upstream's metadata (``swa_loc``: P1 sees the field too) and in the store kernel
    that consumes it (every field equal: only P10, which runs upstream's store_swa_into_unified, sees it)."""
    repo, plants = planted_repo
    plant = KV_PLANT if branch == "pr-ring-stride" else STORE_KERNEL_PLANT
    if branch not in plants:
        pytest.skip(f"the installed release has no {plant.find!r} to plant a bug in")
    assert _gate(repo, tmp_path, cache_dir, branch, "--properties", "P1,P10") == 1, plant.what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P10") and "NEW" in _row(out, "P10"), out
    assert ("BLOCKS" in _row(out, "P1")) == p1_blocks, out


def test_the_release_against_itself_gates_green_on_what_the_stores_do(planted_repo, cache_dir, tmp_path,
                                                                     capsys) -> None:
    """The KV plants' other side: P10 on the release (its known F16 pre-existing, never blocking)."""
    repo, _ = planted_repo
    assert _gate(repo, tmp_path, cache_dir, "main", "--properties", "P1,P10") == 0
    out = capsys.readouterr().out
    assert "gate: GREEN" in out and "BLOCKS" not in _row(out, "P10"), out


@pytest.mark.slow
def test_the_configured_draft_count_read_for_the_verify_width_gates_red(planted_repo, cache_dir, tmp_path,
                                                                        capsys) -> None:
    """Upstream #31026's bug in upstream's own file: red on P1 through the DSpark draft worker's batches (the
    target worker's hold: one count for both), its replay file a draft worker's."""
    repo, plants = planted_repo
    assert "pr-dspark-draft" in plants, "every release 0.5.18-0.5.23 has the uniform verify extension's line"
    assert _gate(repo, tmp_path, cache_dir, "pr-dspark-draft", "--properties", "P1") == 1
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P1") and "NEW" in _row(out, "P1"), out
    replays = [n for n in os.listdir(tmp_path / "failures") if n.startswith("P1-") and n.endswith(".json")]
    assert replays and all('"speculative_num_draft_tokens"' in (tmp_path / "failures" / n).read_text()
                           for n in replays), out


@pytest.mark.slow
def test_a_regression_behind_an_upstream_switch_gates_red_on_its_route(planted_repo, cache_dir, tmp_path,
                                                                      capsys) -> None:
    """The grouped streams' group size broken: only the gasm route (SGLANG_DSV4_GROUPED_ASM=1) sees it, P1-gasm."""
    repo, plants = planted_repo
    if "pr-gasm" not in plants:
        pytest.skip("the installed release has no grouped verify streams (0.5.21+)")
    assert _gate(repo, tmp_path, cache_dir, "pr-gasm", "--properties", "P1") == 1, plants["pr-gasm"].what
    out = capsys.readouterr().out
    assert "BLOCKS" in _row(out, "P1-gasm") and "NEW" in _row(out, "P1-gasm"), out
    assert "BLOCKS" not in _row(out, "P1"), out


def test_a_change_to_a_runner_the_gate_never_runs_is_named_not_judged(planted_repo, cache_dir, tmp_path,
                                                                     capsys) -> None:
    """The runner's load_batch changed: no side runs it, so the verdict names it NOT JUDGED (exit 1), never GREEN."""
    repo, plants = planted_repo
    assert _gate(repo, tmp_path, cache_dir, "pr-runner", "--properties", "P1") == 1, plants["pr-runner"].what
    out = capsys.readouterr().out
    line = next(row for row in reversed(out.splitlines()) if row.startswith("gate: "))
    assert line.startswith("gate: NOT JUDGED (decode_cuda_graph_runner.py changed: "
                           "DecodeCudaGraphRunner.load_batch never ran at head"), line
    assert "GREEN" not in line
