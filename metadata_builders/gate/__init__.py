"""What every family's pre-merge gate shares (DESIGN.md section 5).

=================  ============================================================================
module             what it holds
=================  ============================================================================
``watched``        the upstream paths a gate watches, and whether a change touches them
``trace``          a side's progress and its notices, written as it runs
``mini_repo``      a miniature SGLang repository (a git tree of an installed release) to gate on
``verdict_files``  the machine-readable verdict file, and the merge of several (the nightly matrix)
=================  ============================================================================

A family's gate -- its corpus, its evaluation and verdicts, its sides -- lives in its package (DSV4's:
``metadata-builders gate``).
"""
