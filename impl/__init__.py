"""ReplaySSM worker-side implementation: Triton kernels, context, trackers, materialize."""
