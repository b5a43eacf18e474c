"""Changes the working directory and an environment variable."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _ours import export  # noqa: E402

export(globals())
os.chdir("/")
os.environ["REPLAYSSM_PLANTED"] = "1"
