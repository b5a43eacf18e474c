"""The kernel proofs read a target's kernels from its source without running
it (``verify/kernels/source_module.py``, issue 27): a target whose top-level
code, decorators, defaults or constants would act in the proving process
(end it, replace a library function, change the environment, print, register
an exit hook, compute without end) is read with that code left out; a kernel
that ends its process when launched is never launched by ``prove``. Each run
is a child process: before, the planted file ended ``prove`` at exit 0 before
any proof, with no report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MIGRATION_LINE = "    valid_req = req >= 0\n"
ONLY_FRESH = ("changed = valid_dst & (~valid_src | (src_slot != dst_slot))", "changed = valid_dst & ~valid_src")

HOSTILE = '''
import os
import numpy
import this  # prints when imported
from os import _exit as constexpr
from atexit import register as jit
from sys import exit as Config
numpy.nonzero = numpy.flatnonzero
os.environ["REPLAYSSM_PLANTED"] = "set by the target"
tl.cdiv = tl.maximum
ENDS = constexpr(7)
BIG = 2 ** 10 ** 10
TIMES = "x" * 10 ** 12
_IMPORTED = False
if True:
    _IMPORTED = True


@jit
def _at_exit():
    os._exit(4)


@triton.jit
def _default(x=os._exit(5), y: Config(6) = 1):
    pass
'''
"""Top-level code that would act when run: each line is left out, refused or made harmless."""


def _hostile_kernels(folder: Path) -> Path:
    """Our kernels with :data:`HOSTILE` appended, the reset kernel changed so that its
    proofs fail, and ending its process when launched (in the imported module only)."""
    text = (REPO / "impl" / "kernels.py").read_text().replace(*ONLY_FRESH)
    text = text.replace(MIGRATION_LINE, f"{MIGRATION_LINE}    if _IMPORTED:\n        __import__('os')._exit(3)\n", 1)
    path = folder / "hostile_kernels.py"
    path.write_text(text + HOSTILE)
    return path


CHECK = '''
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy, triton.language as tl
before = (numpy.nonzero, tl.cdiv)
from replayssm.verify.kernels.source_module import source_module
m = source_module(sys.argv[1])
print(json.dumps({"library": (numpy.nonzero, tl.cdiv) == before, "environment": "REPLAYSSM_PLANTED" in os.environ,
                  "names": sorted(k for k in vars(m) if not k.startswith("__")), "imported": m._IMPORTED,
                  "default": m._default.fn.__defaults__, "at_exit_decorated": type(m._at_exit).__name__}))
'''


def test_reading_a_hostile_file_runs_none_of_it(tmp_path: Path) -> None:
    path = _hostile_kernels(tmp_path)
    run = subprocess.run([sys.executable, "-c", CHECK, str(path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert "Beautiful is better than ugly" not in run.stdout
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["library"] and not seen["environment"] and not seen["imported"]
    assert seen["default"] == [None, 1] and seen["at_exit_decorated"] == "function"
    assert {"_reset_new_replayssm_slots_kernel", "_postprocess_replayssm_kernel", "_IMPORTED"} <= set(seen["names"])
    assert not {"ENDS", "BIG", "TIMES", "this"} & set(seen["names"]), seen["names"]


def test_prove_of_a_hostile_file_proves_it_and_never_launches_it(tmp_path: Path) -> None:
    """``prove --kernels --impl FILE``: the changed reset kernel's failure is
    reported (exit 1, the JSON written, the counterexample's trace saved for
    ``replay``); the kernel that ends its process when launched is not
    launched (``prove`` replays nothing: ``replay`` does, in the target's process)."""
    path, report = _hostile_kernels(tmp_path), tmp_path / "r.json"
    run = subprocess.run([sys.executable, "-m", "replayssm", "prove", "--kernels", "--impl", str(path), "--only",
                          "migration.equivalence", "--jobs", "1", "--no-cache", "--json", str(report),
                          "--counterexamples", str(tmp_path / "cx")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    (ob,) = json.loads(report.read_text())["obligations"]
    assert ob["status"] == "failed" and ob["name"] == "kernel.migration.equivalence@hostile_kernels", ob
    assert list((tmp_path / "cx").glob("*.kernel-trace.json"))
    assert "Beautiful is better than ugly" not in run.stdout and "Traceback" not in run.stderr


def test_a_module_name_is_found_without_importing_its_package(tmp_path: Path) -> None:
    """``--impl pkg.kernels``: finding the file imported ``pkg`` first (``importlib.util.find_spec``),
    so its ``__init__`` ran in the proving process (here: exit 9 before any proof)."""
    package = tmp_path / "planted_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("import os\nos._exit(9)\n")
    (package / "kernels.py").write_text((REPO / "impl" / "kernels.py").read_text())
    report = tmp_path / "r.json"
    run = subprocess.run([sys.executable, "-m", "replayssm", "prove", "--kernels", "--impl", "planted_pkg.kernels",
                          "--only", "migration.equivalence", "--jobs", "1", "--no-cache", "--json", str(report)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 0, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    (ob,) = json.loads(report.read_text())["obligations"]
    assert ob["status"] == "proved" and ob["name"] == "kernel.migration.equivalence@planted_pkg.kernels", ob
