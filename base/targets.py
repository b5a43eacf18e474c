"""Loading a target in this process: an importable module, a ``.py`` file as it is, or a docs page.

A target is the code a command judges (``fuzz --impl``, ``review HEAD``,
``prove --kernels --impl``, ``replay --impl``). A file from a vLLM checkout
imports ``vllm.*`` names; they come from the stub package
(:mod:`replayssm.base.vllm_stub`), injected only while the file executes. A
``.txt`` file is vLLM's documentation page of the module, rebuilt into source
(:mod:`.reference_page`). Every problem with the target is a
:class:`TargetError` whose message names the option, the file and what is
wrong (syntax error with its line, a vLLM name the stub lacks, an import that
fails), so a command can exit 2 before any work.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from . import vllm_stub

_COUNTER = itertools.count()

DEFAULT_TARGET = "replayssm.impl.replayssm_utils"
"""The target a command judges when none is named: our implementation's facade."""


class TargetError(ValueError):
    """The target cannot be loaded or used (exit 2); the message names the option and the file or module."""


def import_failure(error: BaseException) -> str:
    """What went wrong importing a target, in words: the error, or the ``sys.exit`` it called."""
    if isinstance(error, SystemExit):
        return f"it called sys.exit({error.code!r}) while being imported"
    return f"{type(error).__name__}: {error}"


def load_source(path: str | Path, label: str = "--impl", raw: bool = False) -> ModuleType:
    """Execute the ``.py`` file at ``path`` with the vLLM stub injected
    (``raw``: a fault of the file's code at import, any ``BaseException`` but
    an ``ImportError`` (a ``NameError``, a ``sys.exit``), is raised as it is,
    for :mod:`.target_host` to report as the target's finding)."""
    path = Path(path)
    if not path.is_file():
        raise TargetError(f"{label} file {str(path)!r} does not exist")
    try:
        text = path.read_text()
    except UnicodeDecodeError as e:
        raise TargetError(f"{label} file {str(path)!r} is not Python source text (UTF-8): {e}") from None
    try:  # compiled, not parsed to ast objects: CPython 3.11.7's conversion to them can raise a spurious
        # "AST constructor recursion depth mismatch" SystemError (gh-106905), which read as the target's fault
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise TargetError(f"{label} file {str(path)!r} does not parse: line {e.lineno}: {e.msg}") from e
    except ValueError as e:  # a null byte
        raise TargetError(f"{label} file {str(path)!r} is not Python source text: {e}") from None
    name = f"replayssm_target_{next(_COUNTER)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"{label} file {str(path)!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with vllm_stub.injected():
            spec.loader.exec_module(module)
    except ImportError as e:
        del sys.modules[name]
        if (e.name or "").startswith("vllm") or "vllm" in str(e):
            raise TargetError(
                f"{label} file {str(path)!r} imports a vLLM name the stub lacks ({e}); "
                f"the stub provides: {', '.join(sorted(vllm_stub.PROVIDED))}") from e
        raise TargetError(f"{label} file {str(path)!r} cannot be imported: {type(e).__name__}: {e}") from e
    except BaseException as e:  # the file's own top-level error, sys.exit included
        del sys.modules[name]
        if raw or not isinstance(e, (Exception, SystemExit)):  # in the target's process: the target's fault
            raise
        raise TargetError(f"{label} file {str(path)!r} cannot be imported: {import_failure(e)}") from e
    return module


def load_docs_page(path: str | Path, label: str = "--impl", raw: bool = False) -> ModuleType:
    """The module a documentation page prints (``.txt``: vLLM's page for
    ``vllm.v1.worker.replayssm_utils``), rebuilt by :mod:`.reference_page` and loaded."""
    from .reference_page import module_source  # it reads our impl's table names: only for a docs page

    path = Path(path)
    if not path.is_file():
        raise TargetError(f"{label} file {str(path)!r} does not exist")
    source = Path(tempfile.mkdtemp(prefix="replayssm-target-")) / f"{path.stem.replace('-', '_')}_kernels.py"
    try:
        text = module_source(path.read_text())
    except (UnicodeDecodeError, SyntaxError, ValueError, IndexError, KeyError) as e:
        raise TargetError(f"{label} file {str(path)!r} is not a documentation page of the module's "
                          f"source: {type(e).__name__}: {e}") from None
    source.write_text(text)  # Triton's JIT reads kernels from a real file
    return load_source(source, label, raw)


def load_target(name: str, *, label: str = "--impl", raw: bool = False) -> ModuleType:
    """The target ``name`` names, loaded here: a ``.py`` path (with the vLLM
    stub), a ``.txt`` documentation page, or an importable module name;
    ``label`` is the option or argument that named it (in every message);
    ``raw``: see :func:`load_source`. The commands load a target in a process
    of its own (:mod:`.isolation`), which calls this."""
    if name.endswith(".py"):
        return load_source(name, label, raw)
    if name.endswith(".txt"):
        return load_docs_page(name, label, raw)
    if "/" in name or Path(name).exists():
        what = "is a folder" if Path(name).is_dir() else "does not exist" if not Path(name).exists() else "is not a .py or .txt file"
        raise TargetError(f"{label} {name!r} {what}: a target is a .py file, a .txt documentation page or an "
                          "importable module name")
    try:
        return importlib.import_module(name)
    except BaseException as e:  # ImportError, or the module's own SyntaxError, sys.exit and the like
        if raw and not isinstance(e, (ImportError, SyntaxError)) or not isinstance(e, (Exception, SystemExit)):
            raise  # in the target's process a fault of its code at import (a NameError) is the target's
        raise TargetError(f"{label} module {name!r} cannot be imported: {import_failure(e)}") from e
