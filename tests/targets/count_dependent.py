"""A fault that depends on how many launches its process has made: the
migration kernel raises on the third launch only, so the same run passes
when it is repeated (Hypothesis then says FlakyFailure)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _ours import export  # noqa: E402

export(globals())
_real = _reset_new_replayssm_slots_kernel  # noqa: F821 - exported above


class _Counting:
    launches = 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            type(self).launches += 1
            if type(self).launches == 3:
                raise RuntimeError("planted: the third launch of this process fails")
            return _real[grid](*args, **kwargs)
        return launch


_reset_new_replayssm_slots_kernel = _Counting()
