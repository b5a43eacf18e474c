"""Proofs kept between runs: a case is not solved again while its exact
query is unchanged.

Two keys, both exact about what they stand for:

- a **case** is keyed by a digest of its query's terms (the term DAG that
  the query's SMT-LIB text writes out: every operator, constant name, sort
  and numeral; :func:`term_digest`), how it is solved (preprocessed or
  not), the solver's version and the obligation's name;
- an **obligation** whose every case was proved is kept under a digest of
  the source files its queries are built from (``spec/``, ``verify/``,
  ``impl/``; not a ``prove --kernels --impl`` target's, so those are never
  reused whole),
  Python's and the solver's versions and its name: an unchanged tree skips
  building the claims too. This assumes the queries depend on nothing else
  (no environment, no randomness); ``tests/verify/test_proof_cache.py``
  checks that two processes build the same case keys.

Every entry is signed (HMAC-SHA256) with this user's key, which the
target's sandbox hides (:mod:`replayssm.base.secret_key`): an entry a
target wrote (from a process it started outside the sandbox, or on a run
without one) or a patched ``prove`` it ran where the key cannot be read is
not signed by us, and is proved again, with one warning per process
(:func:`sealed`, :meth:`ProofCache._unsealed`).

Failures and unknowns are never kept: they are solved again and reported
with their counterexample.

Nothing read back is trusted: each entry names what it stands for (the
obligation, the case, the key its query hashed to) and is used only when
those match what is asked for. An entry that does not (copied over
another's, truncated, not JSON, the wrong shape) is ignored with a warning
on standard error, and its case or obligation is proved again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import z3
from z3 import z3core

from .terms import lift

if TYPE_CHECKING:
    from .obligation import Result

ENV_FOLDER = "REPLAYSSM_VERIFY_CACHE"
"""The environment variable naming the cache folder (the tests point it at a
temporary folder)."""


def default_folder() -> Path:
    """``$REPLAYSSM_VERIFY_CACHE``, else ``$XDG_CACHE_HOME/replayssm-verify``
    (``~/.cache/replayssm-verify``)."""
    if os.environ.get(ENV_FOLDER):
        return Path(os.environ[ENV_FOLDER])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "replayssm-verify"


def solver_version() -> str:
    return z3.get_full_version()


_DIGESTS: dict[int, bytes] = {}
"""Per Z3 term (by its id), its digest: kept for the whole process, since the
system claims share most of their terms (about 20,000 distinct terms for
all 78 step claims)."""
_HELD: list[z3.ExprRef] = []
"""The terms digested so far, held so that no id in :data:`_DIGESTS` is
reused by a new term."""
_DECLS: dict[int, bytes] = {}
_WARNED: set[Path] = set()
"""The entries already reported as ignored in this process."""
_UNSIGNED_SAID: list[str] = []
"""The one warning about entries not signed with this user's key, once said in this process."""

SEAL = b"hmac-sha256 "
"""An entry's first line: this, its signature, a newline; then its JSON."""


def sealed(text: str) -> bytes | None:
    """``text`` as an entry signed with this user's key
    (:mod:`replayssm.base.secret_key`); None when there is no key (nothing is kept)."""
    from replayssm.base import secret_key

    data = text.encode()
    signature = secret_key.sign(data)
    return None if signature is None else SEAL + signature.encode() + b"\n" + data


def term_digest(terms: Iterable[Any]) -> str:
    """A digest of the terms' DAG: two term lists have the same digest
    exactly when they print as the same SMT-LIB text (up to a collision of
    BLAKE2b/SHA-256): every operator, constant name, sort and numeral.
    Walks raw C-API handles, each shared subterm once per process.

    Fresh variables (``terms.fresh_int``, the loops of ``verify.memory``)
    are named by a process-wide counter, so a query with one gets another
    digest in a process that built other claims first: a miss, never a
    wrong hit."""
    out = hashlib.sha256()
    for term in terms:
        t = lift(term)
        _HELD.append(t)
        ctx = t.ctx.ref()
        stack = [(t.as_ast(), False)]
        while stack:
            a, ready = stack.pop()
            i = z3core.Z3_get_ast_id(ctx, a)
            if i in _DIGESTS:
                continue
            if z3core.Z3_get_ast_kind(ctx, a) != z3.Z3_APP_AST:  # quantifiers, bound variables: their text
                _DIGESTS[i] = hashlib.blake2b(z3core.Z3_ast_to_string(ctx, a).encode(), digest_size=16).digest()
                continue
            args = [z3core.Z3_get_app_arg(ctx, a, k) for k in range(z3core.Z3_get_app_num_args(ctx, a))]
            if not ready:
                todo = [b for b in args if z3core.Z3_get_ast_id(ctx, b) not in _DIGESTS]
                if todo:
                    stack.append((a, True))
                    stack.extend((b, False) for b in todo)
                    continue
            if args:
                decl = z3core.Z3_get_app_decl(ctx, a)
                key = z3core.Z3_get_ast_id(ctx, z3core.Z3_func_decl_to_ast(ctx, decl))
                if key not in _DECLS:
                    _DECLS[key] = z3core.Z3_func_decl_to_string(ctx, decl).encode()
                head = _DECLS[key]
            else:  # a constant or a numeral, with its sort
                head = (z3core.Z3_ast_to_string(ctx, a) + ":"
                        + z3core.Z3_sort_to_string(ctx, z3core.Z3_get_sort(ctx, a))).encode()
            _DIGESTS[i] = hashlib.blake2b(head + b"(" + b"".join(_DIGESTS[z3core.Z3_get_ast_id(ctx, b)] for b in args),
                                          digest_size=16).digest()
        out.update(_DIGESTS[z3core.Z3_get_ast_id(ctx, t.as_ast())])
    return out.hexdigest()


def source_digest() -> str:
    """A digest of every Python file the proofs are built from (the spec, the
    obligations, and our kernels, whose source the kernel obligations read),
    by path and content."""
    from replayssm import impl, spec, verify

    out = hashlib.sha256()
    for package in (spec, verify, impl):
        root = Path(package.__file__).parent
        for f in sorted(root.rglob("*.py")):
            out.update(f"{package.__name__}/{f.relative_to(root)}\0".encode())
            out.update(f.read_bytes())
    return out.hexdigest()


class ProofCache:
    """The proved cases and obligations under ``folder``."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self.solver = solver_version()
        self._tree: str | None = None
        self.hits = 0
        """Cases found proved in this process."""

    def _key(self, *parts: str) -> str:
        return hashlib.sha256("\0".join((self.solver, *parts)).encode()).hexdigest()

    def _path(self, kind: str, key: str) -> Path:
        return self.folder / kind / key[:2] / key

    def unwritable(self) -> str | None:
        """Why this cache's folder cannot be written (then nothing is ever
        kept in it), or None when it can."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            probe = self.folder / f".probe.{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as e:
            return e.strerror or str(e)
        return None

    def _read(self, path: Path) -> Any:
        """The JSON at ``path``; None when there is no entry, or when the entry
        is unreadable (reported by :meth:`_ignore`)."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        unsealed = self._unsealed(path, data)
        if unsealed is None:
            return None
        try:
            return json.loads(unsealed)
        except (UnicodeDecodeError, ValueError) as e:
            return self._ignore(path, f"not JSON ({type(e).__name__})")

    def _unsealed(self, path: Path, data: bytes) -> bytes | None:
        """The JSON of the entry ``data`` read at ``path`` when it is signed
        with this user's key; else None (a miss), with one warning per
        process for all such entries (a first run, with nothing kept, prints none)."""
        from replayssm.base import secret_key

        head, _, body = data.partition(b"\n")
        if head.startswith(SEAL) and secret_key.signed_by_us(body, head[len(SEAL):].decode(errors="replace")):
            return body
        if not _UNSIGNED_SAID:
            _UNSIGNED_SAID.append(str(path))
            why = ("it is not signed with this user's key, which a target cannot read "
                   f"({secret_key.folder() / secret_key.NAME}): another process wrote it (a target's?), or an older "
                   "version of this tool" if secret_key.key() is not None else
                   f"no key can be kept in {secret_key.folder()} to check it with")
            print(f"warning: proof cache entry {path} ignored: {why}; proving it, and any other entry so, again",
                  file=sys.stderr, flush=True)
        return None

    def _ignore(self, path: Path, why: str) -> None:
        """Warn (once per process and entry) that the entry at ``path`` is not
        used; returns None (the miss)."""
        if path in _WARNED:
            return None
        _WARNED.add(path)
        print(f"warning: proof cache entry {path} ignored: {why}; proving it again", file=sys.stderr, flush=True)
        return None

    def _write(self, path: Path, text: str) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = sealed(text)
            if data is None:  # no key to sign it with: nothing is kept
                return
            partial = path.with_name(f".{path.name}.{os.getpid()}")
            partial.write_bytes(data)
            partial.replace(path)
        except OSError:  # a cache that cannot be written only costs time
            pass

    # cases

    def case_key(self, obligation: str, query: Iterable[Any], cover: Any, preprocessed: bool) -> str:
        """The key of one case: its query (assumptions and negated open
        goal parts) and its cover."""
        return self._key("case", obligation, "preprocessed" if preprocessed else "raw",
                         term_digest(query), term_digest([cover]))

    def proved_case(self, key: str, obligation: str, case: str) -> dict | None:
        """What was recorded for a proved case of ``obligation`` whose query
        hashed to ``key``: ``{"covered": bool | None}``; None when nothing
        was (a miss: no warning), or when the entry does not name that
        obligation and key (a warning). Another case of the same obligation
        with the very same query (``key`` is its digest: two explicit BMC
        cases, say, whose goal is the verdict of their exploration) is that
        query's proof: the entry serves ``case`` too, silently."""
        path = self._path("cases", key)
        kept = self._read(path)
        if kept is None:
            return None
        wanted = {"obligation": obligation, "key": key}
        if not isinstance(kept, dict):
            return self._ignore(path, f"a {type(kept).__name__}, not an entry")
        wrong = [f"{field} {kept.get(field)!r} (expected {value!r})" for field, value in wanted.items()
                 if kept.get(field) != value]
        if wrong:
            return self._ignore(path, "its " + ", ".join(wrong))
        if kept.get("covered") not in (True, False, None) or "covered" not in kept:
            return self._ignore(path, f"covered {kept.get('covered')!r} is not true, false or null")
        self.hits += 1
        return {"covered": kept["covered"]}

    def keep_case(self, key: str, obligation: str, case: str, covered: bool | None) -> None:
        self._write(self._path("cases", key),
                    json.dumps({"obligation": obligation, "case": case, "key": key, "covered": covered}))

    # whole obligations

    def obligation_key(self, obligation: str, sources: Iterable[str] | None = None) -> str:
        """The key of an obligation proved on this tree; ``sources`` are its
        files outside the tree (``Obligation.sources``; by default the
        registered obligation's)."""
        if self._tree is None:
            self._tree = source_digest()
        if sources is None:
            from .obligation import REGISTRY

            registered = REGISTRY.get(obligation)
            sources = registered.sources if registered is not None else ()
        extra = hashlib.sha256()
        for f in sources:
            extra.update(f"{f}\0".encode())
            extra.update(Path(f).read_bytes() if Path(f).is_file() else b"missing")
        return self._key("obligation", obligation, platform.python_version(), self._tree, extra.hexdigest())

    def proved_result(self, obligation: str, sources: Iterable[str] | None = None) -> Result | None:
        """The obligation's proof on this very tree as a cached result (its
        seconds 0: it took no time in this run), or None; None too when the
        entry is not a proof of that very obligation under that very key."""
        from .obligation import Result

        key = self.obligation_key(obligation, sources)
        path = self._path("obligations", key)
        kept = self._read(path)
        if kept is None:
            return None
        if not isinstance(kept, dict) or kept.get("obligation") != obligation or kept.get("key") != key:
            found = kept.get("obligation") if isinstance(kept, dict) else type(kept).__name__
            return self._ignore(path, f"it is not the entry of {obligation} (it names {found!r})")
        try:
            result = Result.from_json(kept["result"], cached=True)
        except (KeyError, TypeError, ValueError) as e:
            return self._ignore(path, f"its result is incomplete ({type(e).__name__}: {e})")
        if result.name != obligation or result.status != "proved":
            return self._ignore(path, f"its result is {result.name!r} {result.status!r}, not a proof of {obligation}")
        result.seconds = 0.0
        return result

    def catalog(self) -> list[tuple[str, tuple[str, ...]]] | None:
        """The obligations registered on this very tree, in catalog order,
        each with its ``sources``, as the last run that imported the catalog
        recorded them."""
        key = self.obligation_key("", ())
        path = self._path("catalogs", key)
        kept = self._read(path)
        if kept is None:
            return None
        try:
            if kept["key"] != key:
                raise ValueError(f"key {kept['key']!r}")
            catalog = [(str(name), tuple(str(f) for f in sources)) for name, sources in kept["catalog"]]
        except (KeyError, TypeError, ValueError) as e:
            return self._ignore(path, f"not a catalog of this tree ({type(e).__name__}: {e})")
        return catalog

    def keep_catalog(self, obligations: Iterable[Any]) -> None:
        """Record the catalog (registered :class:`~.obligation.Obligation` s) of this tree."""
        key = self.obligation_key("", ())
        entries = [[ob.name, list(ob.sources)] for ob in obligations]
        self._write(self._path("catalogs", key), json.dumps({"key": key, "catalog": entries}))

    def keep_obligation(self, result_json: dict) -> None:
        name = result_json["name"]
        key = self.obligation_key(name)
        self._write(self._path("obligations", key), json.dumps({"obligation": name, "key": key, "result": result_json}))
