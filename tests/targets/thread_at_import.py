"""Starts a non-daemon thread that never ends."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from _ours import export  # noqa: E402

export(globals())
threading.Thread(target=time.sleep, args=(3600,), name="planted-sleeper").start()
