"""Where a vLLM's ReplaySSM code is (``review --vllm PATH``): a source tree, a folder laid out like one, a wheel, or the installed vLLM.

:func:`locate` finds the files a review needs without importing anything of
vLLM: in a folder, the ``vllm/`` package below it (or the folder itself when
it is that package); in a wheel (``.whl``), the same paths read as a zip and
written to a scratch folder; for ``installed``, the folder of the ``vllm``
distribution of the running Python, found through ``importlib.metadata``'s
files or ``importlib.util.find_spec`` (which locates a top-level package
without running it). It says which version it found (a ``version.py`` /
``_version.py`` beside the package, the wheel's or the installation's
``METADATA``, or a folder named ``vllm-X.Y.Z``) and which lifecycle generation:

- ``P`` (the released per-slot ring trackers, vLLM 0.33.0): ``ssu_dispatch.py``
  defines ``_commit_replayssm_ring_trackers_kernel``;
- ``worker`` (the worker-side lifecycle of generations A-D and the reference
  API): ``vllm/v1/worker/replayssm_utils.py`` exists, reviewed as a file.

A place without either raises :class:`LocateError` (``review`` exits 2).
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from replayssm.spec.generations import gen_p

SSU = "vllm/model_executor/layers/mamba/ops/ssu_dispatch.py"
"""The released tracker kernels' file, relative to the folder holding ``vllm/``."""
WORKER = "vllm/v1/worker/replayssm_utils.py"
"""The worker-side lifecycle's file (generations A-D, the reference API)."""
P = gen_p.API.name
"""Generation P's name, from its adapter (``spec/generations/gen_p.py``)."""
P_MARKER = gen_p.API.marker()
"""What makes an ``ssu_dispatch.py`` generation P (its commit kernel's definition)."""
INSTALLED = "installed"
"""The ``--vllm`` value naming the vLLM installed in the running Python."""


class LocateError(ValueError):
    """No vLLM at the place given, or no ReplaySSM code in it."""


@dataclass(frozen=True)
class Located:
    """The ReplaySSM code of one vLLM: where it came from, its version, its generation, the file to review."""

    place: str
    form: str
    """``tree`` (a folder holding ``vllm/``), ``package`` (the ``vllm/`` folder itself), ``wheel`` or ``installed``."""
    version: str
    generation: str
    file: Path
    """The file the review runs: ``ssu_dispatch.py`` (generation P) or ``replayssm_utils.py``."""

    def describe(self) -> str:
        return (f"vLLM {self.version} ({self.form} {self.place}): generation {self.generation}, "
                f"reviewing {self.file}")


_VERSION_LINE = re.compile(r"""^__version__\s*(?::[^=]*)?=\s*["']([^"']+)["']""", re.M)
_FOLDER_VERSION = re.compile(r"vllm-(\d+\.\d+[^/]*)$")


def _metadata_version(text: str) -> str | None:
    m = re.search(r"^Version:\s*(\S+)", text, re.M)
    return m.group(1) if m else None


def _folder_version(root: Path, package: Path) -> str:
    for name in ("version.py", "_version.py"):
        f = package / name
        if f.is_file():
            m = _VERSION_LINE.search(f.read_text(errors="replace"))
            if m:
                return m.group(1)
    for meta in sorted(root.glob("vllm-*.dist-info/METADATA")):
        v = _metadata_version(meta.read_text(errors="replace"))
        if v:
            return v
    for folder in (root, *root.parents):
        m = _FOLDER_VERSION.search(folder.name)
        if m:
            return m.group(1)
    return "unknown"


def _generation(root: Path) -> tuple[str, Path] | None:
    ssu = root / SSU
    if ssu.is_file() and P_MARKER in ssu.read_text(errors="replace"):
        return P, ssu
    if (root / WORKER).is_file():
        return "worker", root / WORKER
    return None


def _in_folder(place: str, root: Path, form: str, version: str | None = None) -> Located:
    found = _generation(root)
    if found is None:
        raise LocateError(f"--vllm {place}: no ReplaySSM code in this vLLM (neither {SSU} with the released "
                          f"ring trackers nor {WORKER}): nothing to review")
    return Located(place, form, version or _folder_version(root, root / "vllm"), found[0], found[1])


def _folder(place: str, path: Path) -> Located:
    if (path / "vllm").is_dir():
        return _in_folder(place, path, "tree")
    if path.name == "vllm" and (path / "__init__.py").is_file() or (path / "model_executor").is_dir():
        return _in_folder(place, path.parent, "package")
    raise LocateError(f"--vllm {place}: not a vLLM source tree (no vllm/ package folder in it)")


def _wheel(place: str, path: Path) -> Located:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise LocateError(f"--vllm {place}: not a readable wheel: {e}") from None
    with archive:
        names = set(archive.namelist())
        version = next((_metadata_version(archive.read(n).decode(errors="replace")) for n in sorted(names)
                        if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", n)), None)
        scratch = Path(tempfile.mkdtemp(prefix="replayssm-wheel-"))
        for name in (SSU, WORKER):
            if name in names:
                target = scratch / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
        if version is None:
            m = re.match(r"vllm-([^-]+)-", path.name)
            version = m.group(1) if m else "unknown"
    return _in_folder(place, scratch, "wheel", version)


def _installed() -> Located:
    from importlib import metadata
    from importlib.util import find_spec

    version = None
    root: Path | None = None
    try:
        dist = metadata.distribution("vllm")
        version = dist.version
        init = next((f for f in dist.files or [] if str(f) == "vllm/__init__.py"), None)
        if init is not None:
            root = Path(str(dist.locate_file(init))).parent.parent
    except metadata.PackageNotFoundError:
        pass
    if root is None:
        try:
            spec = find_spec("vllm")
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations))).parent
    if root is None:
        raise LocateError("--vllm installed: no vLLM is installed in this Python (no vllm distribution or package)")
    return _in_folder(INSTALLED, root, "installed", version)


def locate(place: str) -> Located:
    """The ReplaySSM code at ``place`` (a folder, a ``.whl`` file or ``installed``); :class:`LocateError` if none."""
    if place == INSTALLED:
        return _installed()
    path = Path(place)
    if path.is_dir():
        return _folder(place, path.resolve())
    if path.is_file() and path.suffix == ".whl":
        return _wheel(place, path)
    if path.exists():
        raise LocateError(f"--vllm {place}: must be a vLLM source folder, a .whl file or 'installed'")
    raise LocateError(f"--vllm {place}: no such file or folder (give a vLLM source folder, a .whl file or "
                      f"'installed')")
