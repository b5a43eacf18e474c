"""The Hypothesis example database a campaign's workers share (``fuzz --database DIR``).

Hypothesis keeps each failing example (and the smaller ones it met while
shrinking) in an :class:`~hypothesis.database.ExampleDatabase` under a key of
the test, and replays what is stored there before it generates anything new
(its ``reuse`` phase). A campaign stores every convention combination under a
key of its own (:class:`Namespaced`): the state machine is one class for all
32, and an example drawn under one combination means another run under the
next. So the next campaign, whichever worker or machine runs a combination,
starts that combination with the failures stored for it.

* Local process pool: each worker opens the folder itself
  (:class:`~hypothesis.database.DirectoryBasedExampleDatabase`, which
  several processes of one machine may share).
* Ray (:mod:`.ray_pool`): the folder lives on the driver's machine, opened by
  one actor there; the process that runs the implementation reaches it
  through its Ray task (:class:`PipeDatabase` on a pipe to the task, which
  forwards each call to the actor), so no shared file system is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any

from hypothesis.database import ExampleDatabase

OPERATIONS = ("save", "fetch", "delete", "move")
"""The calls of the ExampleDatabase interface that travel over a pipe."""


class Namespaced(ExampleDatabase):
    """``database`` with every key prefixed by ``prefix`` (one namespace per convention combination)."""

    def __init__(self, database: ExampleDatabase, prefix: str) -> None:
        super().__init__()
        self.database, self.prefix = database, prefix.encode() + b"/"

    def save(self, key: bytes, value: bytes) -> None:
        self.database.save(self.prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.database.fetch(self.prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.database.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.database.move(self.prefix + src, self.prefix + dest, value)


class PipeDatabase(ExampleDatabase):
    """An ExampleDatabase whose calls go over ``conn`` (a duplex pipe) to
    :func:`serve_database` in another process; each call waits for its answer,
    so calls apply in order and an error on the other side is raised here."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn

    def _call(self, operation: str, *args: bytes) -> Any:
        self.conn.send((operation, args))
        ok, value = self.conn.recv()
        if not ok:
            raise OSError(f"the campaign's example database failed: {value}")
        return value

    def save(self, key: bytes, value: bytes) -> None:
        self._call("save", key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return iter(self._call("fetch", key))

    def delete(self, key: bytes, value: bytes) -> None:
        self._call("delete", key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._call("move", src, dest, value)


def apply(database: ExampleDatabase, operation: str, args: tuple) -> Any:
    """Run one call of :data:`OPERATIONS` on ``database`` (``fetch`` as a list, to travel)."""
    if operation not in OPERATIONS:
        raise ValueError(f"not an example database operation: {operation!r}")
    result = getattr(database, operation)(*args)
    return list(result) if operation == "fetch" else None


def serve_database(conn: Connection, call: Callable[[str, tuple], Any]) -> None:
    """Answer :class:`PipeDatabase` requests arriving on ``conn`` with
    ``call(operation, args)`` until the other end closes."""
    while True:
        try:
            operation, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer = (True, call(operation, args))
        except Exception as e:  # noqa: BLE001 - sent to the caller, which raises it
            answer = (False, f"{type(e).__name__}: {e}")
        try:
            conn.send(answer)
        except (BrokenPipeError, OSError):
            return
