"""This user's secret key, which the target's process cannot read: what the proof cache signs its entries with.

A target runs as this user. In the sandbox (:mod:`.sandbox`) the whole file
system is readable, so the key lives in a folder of its own that the
sandbox covers with an empty one (``bwrap --tmpfs``): a target, or a
patched ``prove`` it starts there, cannot read it, and an entry it writes
into a proof cache (from a process it started outside the sandbox, or on
a run without one) carries no valid signature: the judge proves that case
again (:mod:`replayssm.verify.proof_cache`). Without the sandbox a target
could read the file (the tool says so once: it runs as this user), so
there the signature keeps out only a writer that does not look for it.

The key: 32 random bytes in ``$XDG_STATE_HOME/replayssm-verify/key``
(``~/.local/state/replayssm-verify/key``), mode 0600 in a folder of mode
0700, made on first use, atomically (two processes starting at once agree
on one key).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

NAME = "key"

_KEY: dict[Path, bytes | None] = {}
"""The key read (or made) per folder in this process; None: it cannot be kept there."""


def folder() -> Path:
    """The key's folder: ``$XDG_STATE_HOME/replayssm-verify`` (``~/.local/state/replayssm-verify``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "replayssm-verify"


def prepared_folder() -> Path | None:
    """:func:`folder`, made (mode 0700) if it is not there; None when it cannot be."""
    where = folder()
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return where if where.is_dir() else None


def key() -> bytes | None:
    """The key, made on first use; None when it can be neither read nor made
    (an unwritable home): then nothing can be signed."""
    where = folder()
    if where not in _KEY:
        _KEY[where] = _load(where)
    return _KEY[where]


def _load(where: Path) -> bytes | None:
    path = where / NAME
    try:
        data = path.read_bytes()
        return data if len(data) == 32 else None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    if prepared_folder() is None:
        return None
    partial = where / f".{NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
        try:
            os.link(partial, path)  # never replaces one another process made meanwhile: theirs is the key
        except FileExistsError:
            pass
        data = path.read_bytes()
        return data if len(data) == 32 else None
    except OSError:
        return None
    finally:
        try:
            os.unlink(partial)
        except OSError:
            pass


def sign(data: bytes) -> str | None:
    """HMAC-SHA256 of ``data`` under the key, in hex; None when there is no key."""
    secret = key()
    return None if secret is None else hmac.new(secret, data, hashlib.sha256).hexdigest()


def signed_by_us(data: bytes, signature: str) -> bool:
    """Whether ``signature`` is ``data``'s under the key (compared in constant time)."""
    expected = sign(data)
    return expected is not None and hmac.compare_digest(expected, signature)
