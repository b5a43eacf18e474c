"""A fault that depends on how many launches its process has made: the
migration kernel raises on the process's N-th migration launch only
(``$REPLAYSSM_PLANTED_LAUNCH``, default 3), so the same run passes when it
is repeated (Hypothesis then says FlakyFailure), and a run kept from a
process that had launched before need not fail in a fresh one."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _ours import export  # noqa: E402

export(globals())
_real = _reset_new_replayssm_slots_kernel  # noqa: F821 - exported above
_FAILING = int(os.environ.get("REPLAYSSM_PLANTED_LAUNCH", "3"))


class _Counting:
    launches = 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            type(self).launches += 1
            if type(self).launches == _FAILING:
                raise RuntimeError(f"planted: migration launch {_FAILING} of this process fails")
            return _real[grid](*args, **kwargs)
        return launch


_reset_new_replayssm_slots_kernel = _Counting()
