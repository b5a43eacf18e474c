"""The channel between the judge and a target host: messages of plain data, read within a deadline.

A message is a JSON header and raw buffers, never a pickle, so neither side
can run code in the other (:func:`send_frames`). The judge reads a host's
message within a deadline (:func:`recv_frames`): a host that begins a message
and stops is a hang, never a judge blocked for ever.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection

MAX_FRAME = 1 << 32
"""The largest message read from a host (a header and every storage it sends)."""


def send_frames(conn: Connection, header: dict, buffers: Sequence[bytes] = ()) -> None:
    """A message as plain data, in one write: the JSON header's length (8
    bytes), the header (with ``buffers``, their lengths), then the buffers'
    bytes. (One write, not one per buffer: each write wakes the other
    process, and on a machine of two cores a launch then cost a context
    switch per storage each way.)"""
    head = json.dumps({**header, "buffers": [len(b) for b in buffers]}).encode()
    conn.send_bytes(b"".join([len(head).to_bytes(8, "little"), head, *buffers]))


def _read_within(conn: Connection, seconds: float) -> bytes:
    """One ``Connection.send_bytes`` message (its 4-byte length, 8 more for a
    large one, then the bytes), read within ``seconds``: a ``TimeoutError``
    when it does not all arrive by then, ``EOFError`` when the other end closes."""
    fd, deadline = conn.fileno(), time.monotonic() + seconds

    def take(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"{len(data)} of {n} bytes within {seconds:g} s")
            chunk = os.read(fd, min(n - len(data), 1 << 24))
            if not chunk:
                raise EOFError
            data += chunk
        return bytes(data)

    (size,) = struct.unpack("!i", take(4))
    if size == -1:
        (size,) = struct.unpack("!Q", take(8))
    if not 0 <= size <= MAX_FRAME:
        raise ValueError(f"a message of {size} bytes")
    return take(size)


def recv_frames(conn: Connection, seconds: float | None = None) -> tuple[dict, list[bytes]]:
    """What :func:`send_frames` sent, all of it within ``seconds`` (None: no
    bound, as a host waits for the judge's next request); a ``TimeoutError``
    when it is begun and not finished by then, a ``ValueError`` for anything
    that is not such a message."""
    data = conn.recv_bytes(MAX_FRAME) if seconds is None else _read_within(conn, seconds)
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size]) if 8 <= 8 + size <= len(data) else None
    lengths = header.get("buffers") if isinstance(header, dict) else None
    if (not isinstance(header, dict) or not isinstance(lengths, list)
            or not all(type(n) is int and n >= 0 for n in lengths) or 8 + size + sum(lengths) != len(data)):
        raise ValueError(f"not a message: {data[:200]!r}")
    view, start, buffers = memoryview(data), 8 + size, []
    for n in lengths:
        buffers.append(bytes(view[start:start + n]))
        start += n
    return header, buffers
