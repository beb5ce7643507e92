"""The DeepSeek-V4 family: SGLang's ``deepseek_v4_backend_hip_radix`` (and its CUDA sibling) on target verify and
every mode of the MTP step (DESIGN.md sections 2 and 3).

=============  ======================================================================================
module         what it holds
=============  ======================================================================================
``batch``      :class:`VerifyBatch`, its geometry, tier, modes, validation and JSON schema
``metadata``   the field table (:data:`FIELDS`), the build result and the field-by-field diff
``variants``   the variants a batch is built under (path, mirror, token map) and the dspark gate
``tier``       the graph runner's tiers and its capture geometry
``kv_state``   the KV pools P10 keeps (the SWA ring, the compressed pools, the paged SWA store)
``reference``  the pure-Python reference, one function per stage
``hip``        the bundled torch builder mirroring upstream's HIP path stage by stage
``sglang``     the adapter: upstream's own backend on CPU, per release 0.5.18-0.5.23
=============  ======================================================================================
"""
