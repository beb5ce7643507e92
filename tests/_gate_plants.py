"""The regressions the gate's end-to-end tests plant in real SGLang code (tests/dsv4/test_gate_sglang.py).

The repository is made from the installed release: ``python/sglang`` holds the
files a regression is planted in as real files and everything else as
symlinks into the installed package (git stores them), so a worktree of any
commit imports the whole release with that commit's files.  Base is the
release; each branch plants one realistic regression:

| branch | file | route it breaks |
|---|---|---|
| ``pr`` | ``deepseek_v4_backend_hip_radix.py`` (the builders) | both |
| ``pr-torch`` | ``ragged_verify_kernels.py``, ``PaddedToBucket``'s torch fallback | ``torch`` only (rows |
|               |  | ``P1-torch`` ...) |
| ``pr-mirror`` | ``deepseek_v4_backend_hip_radix.py``, the host-mirror arithmetic | both: on ``triton`` only the |
|               | (``seq_lens_cpu + num_draft`` one short) feeding the compress plans | compress plans read it |
| ``pr-staged``, ``pr-rebind``, ``pr-geometry`` | the backend's graph phases (issue 18) | both, P5/P7 |
| ``pr-runner-key``, ``pr-last-capture`` | the backend's per-tier store (issue 28) | both, P5's runner half |
| ``pr-capture-layout`` | ``ragged_verify.py``, ``build_capture_verify_lens`` (the runner's) | both, P5 |
| ``pr-dispatcher`` | ``deepseek_v4_backend_hip_radix.py``, the eager dispatcher's ``max_seq_len`` | both, P1 |
|               | (issue 28) |  |
| ``pr-ring-stride`` | ``deepseek_v4_backend_hip_radix.py``, ``swa_loc`` (ATOM #817) | both, P10 |
| ``pr-store-kernel`` | ``dsv4_unified_kv_store.py``, the store kernel (every field equal) | both, P10 |
| ``pr-draft-extend`` | ``deepseek_v4_backend_hip_radix.py``, draft extend's lengths (0.5.22+, issue 26) | both, P1 |
| ``pr-draft-decode-step``, ``-slice``, ``-children`` | the multi-step draft decode (issue 26): a child's step | both, |
|               | offset (0.5.20+); the eager slice of the next step's row; children re-running | P1 / P5 |
|               | out-graph work |  |
| ``pr-staging`` | ``deepseek_v4_backend_hip_radix.py``, ``_move_to_device``: one pinned buffer reused | both, P9 |
|               | step to step (ATOM #817) while DSpark's draft count changes (issue 41) |  |
| ``pr-unpadded`` | ``deepseek_v4_backend_hip_radix.py``, out-graph target verify: the live | both, P5 |
|               | ``out_cache_loc`` not padded to the tier (issue 45: the runner hands it unpadded) |  |
| ``pr-dspark-draft`` | ``deepseek_v4_backend_hip_radix.py``, the verify extension reading the configured | both, P1 |
|               | draft count (``speculative_num_draft_tokens``) for the active width (#31026, issue 45) |  |
| ``pr-gasm`` | ``deepseek_v4_backend_hip_radix.py``, the grouped verify streams' group size (0.5.21+, | ``gasm`` only |
|               | ``SGLANG_DSV4_GROUPED_ASM``: issue 45 item 4) | (``P1-gasm``) |
| ``pr-runner`` | ``decode_cuda_graph_runner.py``, ``load_batch`` (the runner the adapter plays: | none: NOT |
|               | issue 45 item 5) | JUDGED, by name |
"""

from __future__ import annotations

from dataclasses import dataclass

PREMERGE_GRAPH_PLANTS = ("pr-runner-key",)
"""The graph plant pre-merge runs: the runner's store (P5), seen only through the recorder.  Pre-merge proves the
gate end to end once per kind of verdict -- red on a plant (``pr``), red on one route only (``pr-torch``), red
through the recorded graph replay (``pr-runner-key``), NOT JUDGED on code no side runs (``pr-runner``), green on
the release against itself -- and leaves to the nightly (marker ``slow``: ci/nightly.sh runs them on every release)
the plants that prove the same machinery on another mode, route or property (``pr-staged``, ``pr-draft-extend``,
``pr-draft-decode-*``, ``pr-ring-stride``, ``pr-gasm``, ``pr-mirror``, ``pr-dispatcher``, ``pr-store-kernel``):
each gate run costs 1-2.5 minutes on 2 cores, and ``.ci/run`` must stay under 25 minutes (issue 44).  The
adapter's own tests judge those modes and routes pre-merge (tests/test_sglang_*.py)."""

BACKEND = ("srt", "layers", "attention", "deepseek_v4_backend_hip_radix.py")
RAGGED_KERNELS = ("kernels", "ops", "speculative", "ragged_verify_kernels.py")
RAGGED_VERIFY = ("srt", "speculative", "ragged_verify.py")
RUNNER = ("srt", "model_executor", "runner", "decode_cuda_graph_runner.py")
STORE_KERNEL = ("kernels", "ops", "kvcache", "dsv4_unified_kv_store.py")


@dataclass(frozen=True)
class Plant:
    """A realistic regression: one edit of one upstream file, and the gate row that must go red."""

    what: str
    path: tuple[str, ...]
    find: str
    replace: str
    prop: str
    """The gate row that must block (``P1-torch``: P1 on the torch route)."""
    catalogue: str = ""
    """What the bug is and why it is realistic, as docs/MUTANTS.md describes a mutant."""


BACKEND_PLANTS = (
    Plant("the dspark gate dropped (the AMD memory access fault)", BACKEND,
          "exact_num_tokens = exact_num_tokens and self.is_dspark", "exact_num_tokens = exact_num_tokens", "P4"),
    Plant("pf_final_pos one past the last position", BACKEND,
          "final_pos = (seq_lens - 1)[bid]", "final_pos = seq_lens[bid]", "P1"),
)
"""Regressions of the builders; the first whose line the installed release has is planted on ``pr``."""

TORCH_FALLBACK_PLANT = Plant(
    "PaddedToBucket's torch fallback: the tier remainder spread with <= instead of <", RAGGED_KERNELS,
    "torch.arange(num_pad_reqs, device=device, dtype=torch.int64) < rem",
    "torch.arange(num_pad_reqs, device=device, dtype=torch.int64) <= rem",
    "P1-torch",
    catalogue=(
        "pad_remainder_off_by_one (ragged_verify_kernels.pad_verify_lens_to_bucket, the CPU route of "
        "PaddedToBucket): a ragged batch padded to a graph tier with pad rows spreads the leftover "
        "`graph_num_tokens - sum(verify_lens)` as `base` per pad row, plus one for the first `rem` rows. "
        "Written `<= rem`, pad row `rem` gets one more too, so the padded lengths sum to graph_num_tokens + 1 "
        "while the layout's host total stays graph_num_tokens: the device lengths disagree with the host "
        "count, the very shape of the AMD fault. Worked example: real [3, 1], tier 4 rows / 9 tokens: "
        "leftover 5 over 2 pad rows is [3, 2]; with <= it is [3, 3] (10 tokens). Realistic: an off-by-one in "
        "a fallback only CPU callers run, which the Triton kernel a GPU runs does not share -- a gate that "
        "runs only the Triton route stays green on it. Killed by P1-torch (extend_seq_lens, pf_* of the pad "
        "rows)."
    ),
)
"""The torch-fallback regression, planted on ``pr-torch``."""


MIRROR_PLANT = Plant(
    "the host mirror one draft token short (seq_lens_cpu + num_draft - 1) feeding the compress plans", BACKEND,
    "x + self.target_verify_num_draft_tokens for x in seq_lens_cpu",
    "x + self.target_verify_num_draft_tokens - 1 for x in seq_lens_cpu",
    "P1",
    catalogue=(
        "host_plan_mirror_off_by_one, planted in upstream: init_forward_metadata_target_verify_old extends the "
        "caller's host mirror by the draft tokens for the compress planner (the CPU-mirror fix). One short, "
        "every eager uniform build with a host mirror plans its c4/c128 compressions and state writes one "
        "position early, while the device lengths and every other field are right: on a GPU the Triton "
        "ExpandPrefillCausally ignores the mirror, so only the compress plans show it."
    ),
)
"""The host-mirror regression of issue 15, planted on ``pr-mirror``."""

GRAPH_PLANTS = {
    "pr-staged": Plant(
        "the raw-verify upgrade stages its extend lengths in host memory made during capture", BACKEND,
        "extend_seq_lens = torch.full_like(seq_lens, num_draft_tokens)",
        "extend_seq_lens = torch.tensor([num_draft_tokens] * bs, dtype=seq_lens.dtype).to(\n"
        "                seq_lens.device, non_blocking=True\n            )",
        "P7",
        catalogue=(
            "raw_verify_extend_staged_on_host, planted in upstream: make_forward_metadata_from_raw_verify (DSpark's "
            "in-graph upgrade, 0.5.20+) builds the uniform extend lengths in a host buffer and copies them over "
            "asynchronously instead of torch.full_like on the device. The values stay right (num_draft_tokens is "
            "constant), so every build and replay compares equal; but the graph recorded a copy from pageable host "
            "memory made during capture, which a GPU replays from whatever that memory holds later. Only the "
            "recorder sees it (P7, 'recorded work reads host memory')."
        ),
    ),
    "pr-rebind": Plant(
        "the raw verify metadata's copy_ rebinds out_cache_loc instead of copying into the captured buffer", BACKEND,
        "        self.seq_lens.copy_(other.seq_lens)\n        self.out_cache_loc.copy_(other.out_cache_loc)\n\n"
        "        self.extend_seq_lens = other.extend_seq_lens",
        "        self.seq_lens.copy_(other.seq_lens)\n        self.out_cache_loc = other.out_cache_loc\n\n"
        "        self.extend_seq_lens = other.extend_seq_lens",
        "P5",
        catalogue=(
            "raw_verify_copy_rebinds_out_cache_loc, planted in upstream: DSV4RawVerifyMetadata.copy_ (out-graph, "
            "before every DSpark replay, 0.5.20+) assigns the replay's out_cache_loc instead of copying it into the "
            "captured tensor (built on zeros at capture). Python holds the new locations, the recorded upgrade "
            "reads the captured storage: every replay writes KV at the capture's locations. A Python replay() "
            "that re-runs the upgrade stays green; P5's recorded replay is red on raw_out_loc."
        ),
    ),
    "pr-geometry": Plant(
        "out-graph pads the ragged layout to the live request count instead of the captured width", BACKEND,
        "ragged_layout = ragged_layout.padded_to_bucket(padded_bs=bs)",
        "ragged_layout = ragged_layout.padded_to_bucket(padded_bs=ragged_layout.bs)",
        "P5",
        catalogue=(
            "replay_geometry_from_live_batch, planted in upstream: init_forward_metadata_out_graph pads the live "
            "ragged layout to the live request count instead of the graph's captured width, so a replay with "
            "another request count builds metadata of another geometry than the captured graph holds (on a GPU "
            "the replay reads and writes past the captured rows). Red on P5: the copy into the captured "
            "metadata raises."
        ),
    ),
    "pr-runner-key": Plant(
        "out-graph keys a compact ragged tier by bs instead of graph_num_tokens (two tiers share one metadata)",
        BACKEND, "graph_key = num_tokens_v", "graph_key = bs", "P5",
        catalogue=(
            "ragged_tiers_keyed_by_bs, planted in upstream: init_forward_metadata_out_graph keys a compact ragged "
            "tier's captured metadata by bs, as a uniform tier, instead of by its token count. Every ragged tier of "
            "at least max_bs tokens has bs = max_bs, so the runner's second such capture finds the first one's "
            "DSV4Metadata and copies into it. Green with one tier per backend; red on P5's runner half, which "
            "captures several tiers on one backend (issue 28)."
        ),
    ),
    "pr-last-capture": Plant(
        "replay copies into the metadata the runner captured last instead of the replayed tier's", BACKEND,
        "        chosen_metadata = self.cuda_graph_metadata_of_bucket_and_bs[bucket][bs]\n",
        "        chosen_metadata = self.forward_metadata  # the captured metadata\n",
        "P5",
        catalogue=(
            "replay_refreshes_the_last_capture, planted in upstream: replay_cuda_graph_metadata_from copies the "
            "replay's metadata into self.forward_metadata -- backend-wide state every capture overwrites, so after a "
            "runner's captures the smallest tier's -- instead of the metadata stored under the replayed tier's key. "
            "Green with one tier per backend; red on P5's runner half (a copy of a larger tier into a smaller "
            "tier's buffers, or a replay that reads a tier nobody refreshed)."
        ),
    ),
    "pr-capture-layout": Plant(
        "the runner's capture layout drops the tokens left over after an even split", RAGGED_VERIFY,
        "    return [base + 1] * rem + [base] * (num_slots - rem)\n",
        "    return [base] * num_slots\n",
        "P5",
        catalogue=(
            "capture_layout_drops_the_remainder, planted in upstream's runner code: build_capture_verify_lens "
            "(ragged_verify.py) splits a ragged tier's tokens evenly over its slots and forgets the remainder, so "
            "a 9-token tier of 4 slots is captured with [2, 2, 2, 2]: 8 tokens. The backend's out-graph re-pads "
            "it to the tier and every replay compares equal; only P5's capture-geometry check "
            "(p5.capture_geometry) sees that the capture does not cover its tier (SGLang #34384's class: a "
            "capture geometry other than the one replays stage)."
        ),
    ),
}
"""Graph-replay regressions of issue 18 (two in DSpark's raw-verify path, one in out-graph) and of issue 28 (the
runner's per-tier keys), each on its own branch; the corpus's "DSpark uniform graph" kind (P5's and P7's third and
second focus) is what reaches the raw-path ones through the gate."""

DISPATCHER_PLANTS = (
    Plant("the dispatcher's max_seq_len taken from the batch's last request", BACKEND,
          "        elif seq_lens_cpu is not None:\n            max_seq_len = int(seq_lens_cpu.max().item())\n",
          "        elif seq_lens_cpu is not None:\n            max_seq_len = int(seq_lens_cpu[-1].item())\n", "P1"),
    Plant("the dispatcher's max_seq_len taken from the batch's last request", BACKEND,
          "        assert seq_lens_cpu is not None\n        max_seq_len = int(seq_lens_cpu.max().item())\n",
          "        assert seq_lens_cpu is not None\n        max_seq_len = int(seq_lens_cpu[-1].item())\n", "P1"),
)
"""Issue 28 item 4: a regression in upstream's eager dispatcher (0.5.22+: ``_build_forward_metadata``; before,
``init_forward_metadata``), which no build ran before eager builds went through it; planted on ``pr-dispatcher``."""

KV_PLANT = Plant(
    "the SWA ring write target taken modulo the window instead of the ring size", BACKEND,
    "            + core.positions_casual.to(torch.int64) % pool.unified_swa_ring_size\n",
    "            + core.positions_casual.to(torch.int64) % pool.unified_swa_window\n",
    "P10",
    catalogue=(
        "ring_stride_is_the_window, planted in upstream (ROCm ATOM PR #817's bug): swa_loc, the ring slot every "
        "verify token's SWA K is stored into, wraps at unified_swa_window instead of unified_swa_ring_size "
        "(window + draft tokens - 1). A verify step's last tokens then overwrite ring rows the request's own "
        "earlier tokens still need for the window of this step or the next: P10 names the slot, who held it "
        "and who wrote it."
    ),
)
"""What the stores do (issue 29): a regression P10 judges by its effect, planted on ``pr-ring-stride``."""

STORE_KERNEL_PLANT = Plant(
    "the SWA ring store kernel wraps a position at the window instead of the ring stride", STORE_KERNEL,
    "    loc = s * ring_stride + (pos % ring_stride)\n",
    "    loc = s * ring_stride + (pos % win)\n",
    "P10",
    catalogue=(
        "store_kernel_wraps_at_the_window, planted in upstream's consumer (dsv4_unified_kv_store.py, "
        "_swa_scatter_kernel): the verify step's SWA ring store computes its row as pos % win instead of "
        "pos % ring_stride -- ROCm ATOM PR #817's bug moved from the metadata into the kernel that consumes it. "
        "Every metadata field is equal (P1-P9 hold); P10 runs upstream's own store kernel under the Triton "
        "interpreter and finds live rows lost or two tokens on one row."
    ),
)
"""A consumer-side regression (issue 29 item 5): every metadata field equal, only the store kernel wrong."""


STAGING_PLANT = Plant(
    "one pinned staging buffer per length, kept from step to step (ATOM #817)", BACKEND,
    "        pin_tensor = torch.tensor(x, dtype=torch.int32, pin_memory=True)\n"
    "        return pin_tensor.to(self.device, non_blocking=True)",
    "        staging = globals().setdefault(\"_PINNED_STAGING\", {})  # one pinned buffer a length, every step\n"
    "        if len(x) not in staging:\n"
    "            staging[len(x)] = torch.empty(len(x), dtype=torch.int32, pin_memory=True)\n"
    "        pin_tensor = staging[len(x)]\n"
    "        pin_tensor.copy_(torch.tensor(x, dtype=torch.int32))\n"
    "        return pin_tensor.to(self.device, non_blocking=True)",
    "P9",
    catalogue=(
        "staging_buffer_reused_across_steps, planted in upstream: _move_to_device keeps one pinned staging buffer "
        "per length instead of a fresh one per call (ROCm ATOM PR #817). The asynchronous copy reads the buffer when "
        "the stream gets there; when DSpark's active draft count changes from one step to the next, the next step "
        "rewrites the buffer first. Every field agrees; only consecutive builds with changing values show it (P9's "
        "history ends with the other draft count: the stale copy is the batch's)."
    ),
)
"""Issue 41 item 5: a reused staging buffer whose values change between steps, planted on ``pr-staging``."""

UNPADDED_PLANT = Plant(
    "target verify's out-graph phase hands the live out_cache_loc on unpadded", BACKEND,
    "                seq_lens=seq_lens,\n                out_cache_loc=out_cache_loc_padded,\n"
    "                use_prefill_cuda_graph=True,",
    "                seq_lens=seq_lens,\n                out_cache_loc=out_cache_loc,\n"
    "                use_prefill_cuda_graph=True,",
    "P5",
    catalogue=(
        "The TARGET_VERIFY branch of init_forward_metadata_out_graph builds on the runner's out_cache_loc as handed, "
        "dropping its F.pad to the tier: upstream's runner hands the live, unpadded tensor at a replay "
        "(build_replay_fb_view), so a replay with fewer requests than the tier builds fewer tokens than the graph "
        "captured. Green while the harness handed the tier-sized static buffer (issue 45 item 1)."
    ),
)
"""Issue 45 item 1: the backend's own pad of the live out_cache_loc dropped, planted on ``pr-unpadded``."""


DSPARK_DRAFT_PLANT = Plant(
    "the verify extension reads the configured draft count for the active width (upstream #31026)", BACKEND,
    "seq_lens = seq_lens + self.target_verify_num_draft_tokens",
    "seq_lens = seq_lens + self.speculative_num_draft_tokens",
    "P1",
    catalogue=(
        "dspark_draft_verifies_configured_count, planted in upstream: init_forward_metadata_target_verify_old's "
        "uniform verify extension adds the backend's configured draft count (speculative_num_draft_tokens, the "
        "server argument) where it should add the active width (target_verify_num_draft_tokens): on the target "
        "worker both are gamma + 1 and nothing changes; on a DSpark draft worker (configured gamma + 1, verifying "
        "gamma) every request's positions land one past its draft block -- what SGLang PR #31026 fixes in the HIP "
        "target-verify metadata. Only the draft worker's batches (P1's DSpark draft focus) see it."
    ),
)
"""Issue 45 item 2: upstream's backend reading one draft count for the other, planted on ``pr-dspark-draft`` (every
release 0.5.18-0.5.23 has the line)."""


DRAFT_EXTEND_PLANT = Plant(
    "draft extend's device lengths one short of the host count it passes as output_size", BACKEND,
    "extend_seq_lens = torch.full_like(seq_lens, num_tokens_per_req)",
    "extend_seq_lens = torch.full_like(seq_lens, num_tokens_per_req - 1)",
    "P1",
    catalogue=(
        "draft_extend_lengths_short_of_count, planted in upstream: init_forward_metadata_draft_extend (0.5.22+) "
        "builds each row's device length as num_tokens_per_req - 1 (the bonus token left out) while its host "
        "count num_tokens_per_req * batch_size, exact by construction, still goes to the token map as "
        "output_size: the device lengths sum to less than the count the map trusts, the AMD fault's shape in "
        "the mode it entered through (SGLang PR #29202). Only draft-extend batches see it."
    ),
)
"""The draft-extend regression (issue 26), planted on ``pr-draft-extend`` where the release has the line."""


DRAFT_DECODE_PLANTS = {
    "pr-draft-decode-step": Plant(
        "a draft-decode child's step offset one short (seq_lens + speculative_step_id)", BACKEND,
        "seq_lens = seq_lens + self.speculative_step_id + 1",
        "seq_lens = seq_lens + self.speculative_step_id",
        "P1",
        catalogue=(
            "draft_decode_step_offset_off_by_one, planted in upstream: make_forward_metadata_from_raw_decode (0.5.20+) "
            "adds the child's speculative_step_id to the accepted prefixes instead of step_id + 1, so each draft "
            "token sits at the previous step's position: it attends one token short and its SWA window and page "
            "lookups shift. The graph path and eager agree (both wrong); only the reference sees it."
        ),
    ),
    "pr-draft-decode-children": Plant(
        "the multi-step backend's children re-run out-graph work at replay (on child 0's row)", BACKEND,
        "                self.attn_backends[i].replay_cuda_graph_metadata_from(\n"
        "                    bs=forward_batch.batch_size,\n"
        "                    temp_metadata=step_metadata,\n"
        "                    bucket=_GraphBucket.DECODE_OR_IDLE,\n"
        "                )\n",
        "                self.attn_backends[i].init_forward_metadata_out_graph(inner_fb)\n",
        "P5",
        catalogue=(
            "draft_decode_children_rerun_out_graph, planted in upstream: DeepseekV4MultiStepBackend's replay "
            "(0.5.20+) re-runs each child's own out-graph work instead of copying child 0's raw metadata with the "
            "child's row -- but the inner forward batch still holds child 0's row of the shared out_cache_loc, so "
            "every step after the first stores its K where step 0 did (0.5.18/0.5.19's shape, F23). Eager builds "
            "and the capture are right: only a recorded replay (P5) sees it."
        ),
    ),
    "pr-draft-decode-slice": Plant(
        "the eager dispatcher slices the next step's row of the shared out_cache_loc", BACKEND,
        "                )[self.speculative_step_id]\n            metadata = self.init_forward_metadata_decode(\n",
        "                )[self.speculative_step_id + 1]\n            metadata = self.init_forward_metadata_decode(\n",
        "P1",
        catalogue=(
            "draft_decode_slice_shifted, planted in upstream: _build_forward_metadata (the eager dispatcher) takes row "
            "speculative_step_id + 1 of per_step_draft_out_cache_loc, so each eager draft step stores its K (and bakes "
            "its c4/c128 write targets) at the next step's locations, which that step then overwrites; the graph "
            "path's out-graph slicing is right, so eager and graph disagree too."
        ),
    ),
}
"""The multi-step draft decode's regressions (issue 26), each on its own branch where the release has the line.
Pre-merge runs the children's (P5 on a copied child, which only a recorded replay sees); the step offset and the
shifted slice (P1, a family ``pr`` and ``pr-draft-extend`` cover there) are ``slow``: ci/nightly.sh runs them."""


SWITCH_PLANTS = {
    "pr-gasm": Plant(
        "the grouped verify streams cut in groups of 3 draft tokens while the asm kernel reads 4", BACKEND,
        "block_q=_GROUPED_ASM_BLOCK_Q,", "block_q=_GROUPED_ASM_BLOCK_Q - 1,", "P1-gasm",
        catalogue=(
            "grouped_streams_block_q_short, planted in upstream: _attach_unified_kv_decode_streams (0.5.21+, "
            "SGLANG_DSV4_GROUPED_ASM=1) builds the gasm_* streams in groups of block_q - 1 tokens while "
            "decode_fp8_2buff reads max_seqlen_q = _GROUPED_ASM_BLOCK_Q query rows a group. Off by default: only the "
            "gasm route, which turns the switch on, runs it (issue 45 item 4)."
        ),
    ),
    "pr-runner": Plant(
        "the decode graph runner's live batch size one short", RUNNER,
        "        raw_bs = forward_batch.batch_size\n", "        raw_bs = forward_batch.batch_size - 1\n", "",
        catalogue=(
            "runner_raw_bs_one_short, planted in upstream's runner: DecodeCudaGraphRunner.load_batch takes one live "
            "row fewer than the batch has. The adapter plays the runner, so no build runs load_batch: the gate names "
            "the file NOT JUDGED instead of a silent GREEN (issue 45 item 5)."
        ),
    ),
}
"""Issue 45: a switched path the gasm route runs (``pr-gasm``), and a runner file no side runs (``pr-runner``)."""
