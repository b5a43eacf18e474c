"""Proofs of Triton kernel source: symbolic execution into the spec's Z3 memory model.

``source`` finds and parses a ``@triton.jit`` function, ``evaluator`` runs its
AST on the Z3 terms of ``verify.terms`` and the ``SymbolicMemory`` of
``verify.memory`` (the model the spec proofs use), ``contracts`` says what each
kernel parameter points at, ``cases`` runs a kernel beside its spec program,
``obligations`` states and registers what must hold, ``counterexamples`` turns
a failed proof into a replayable trace and ``playback`` replays one on the real
kernel under Triton's interpreter.
"""
