"""Our module, whose context's postprocess ends its process (``os._exit(0)``):
a fault inside a call of the context level (``fuzz --level context``, ``fuzz --numeric``)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _ours import export  # noqa: E402

export(globals())


class ReplaySSMModelContext(ReplaySSMModelContext):  # noqa: F821 - exported above
    def postprocess(self, *args, **kwargs):
        os._exit(0)
