"""The messages between the judging process and a target's host, and the host's check of its functions."""

from __future__ import annotations

import json
import socket
import types
from multiprocessing.connection import Connection

import pytest

from replayssm.base.host_channel import recv_frames, send_frames
from replayssm.base.target_host import Functions


def _pair() -> tuple[Connection, Connection]:
    a, b = socket.socketpair()
    return Connection(a.detach()), Connection(b.detach())


def test_a_message_crosses_whole_in_one_write() -> None:
    ours, theirs = _pair()
    writes = []
    send = ours.send_bytes
    ours.send_bytes = lambda data: (writes.append(len(data)), send(data))  # type: ignore[method-assign]
    send_frames(ours, {"op": "launch", "grid": [4]}, [b"abc", b"", bytes(range(256))])
    header, buffers = recv_frames(theirs)
    assert header == {"op": "launch", "grid": [4], "buffers": [3, 0, 256]}
    assert buffers == [b"abc", b"", bytes(range(256))]
    assert len(writes) == 1  # one wake-up of the other process per message, not one per storage


def _raw(head: dict, tail: bytes = b"") -> bytes:
    text = json.dumps(head).encode()
    return len(text).to_bytes(8, "little") + text + tail


@pytest.mark.parametrize("data", [
    _raw({"buffers": [4]}, b"abc"),            # a buffer shorter than its length
    _raw({"buffers": [2]}, b"abcd"),           # bytes past the last buffer
    _raw({"buffers": 1}, b"a"),                # the old count, not lengths
    _raw({"buffers": [-1]}, b""),              # a negative length
    _raw({"buffers": [True]}, b"a"),           # a bool is no length
    _raw({"op": "launch"}),                    # no lengths at all
    b"\xff" * 8 + b"{}",                       # a header length past the message
    b"abc",                                    # shorter than the header's length
    (2).to_bytes(8, "little") + b"\xff\xfe",   # a header that is not JSON
], ids=["short", "trailing", "count", "negative", "bool", "missing", "long-header", "tiny", "not-json"])
def test_anything_but_a_message_is_a_value_error(data: bytes) -> None:
    ours, theirs = _pair()
    ours.send_bytes(data)
    with pytest.raises(ValueError):
        recv_frames(theirs)


def test_a_replaced_function_is_named_even_when_it_claims_equality() -> None:
    class Equal:
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

        def __call__(self) -> None:
            pass

    module = types.SimpleNamespace(nonzero=len, where=abs, pi=3.14, __name__="m")
    before = Functions(vars(module))
    assert before.names == ("nonzero", "where")
    assert before.replaced(vars(module)) == []
    module.where = Equal()
    assert before.replaced(vars(module)) == ["where"]
    del module.nonzero  # a name deleted is not a replacement
    module.where = abs
    assert before.replaced(vars(module)) == []
