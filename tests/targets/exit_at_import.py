"""Ends its process while it is imported, with a success status."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _ours import export  # noqa: E402

export(globals())
print("about to leave")
os._exit(0)
