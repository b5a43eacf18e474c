"""Reviewing real versions of vLLM's ReplaySSM worker kernels against the lifecycle.

``target`` loads a version unmodified (with the ``vllm_stub`` package),
``adapters`` say per launch API generation how a caller drives its kernels,
``ghost`` plays FlashInfer on the slots' contents, ``lifecycle`` judges any
generation after every step, and ``command`` is ``replayssm-verify review``.
"""
