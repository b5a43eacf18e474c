"""``base/interrupts.py``: a signal within ``interruptible()`` stops the work even where its exception is lost."""

from __future__ import annotations

import gc
import os
import signal

import pytest

from replayssm.base.interrupts import Interrupted, interruptible, raise_if_interrupted, signal_first


class _SignalsWhenCollected:
    """An object whose finalizer sends a signal to this process: the handler's
    exception is raised inside ``__del__``, where Python prints it and goes on."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped exception, as meant
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_whose_exception_a_finalizer_swallowed_is_raised_at_the_next_check(signum: int) -> None:
    with interruptible():
        _SignalsWhenCollected(signum)  # collected at once: the Interrupted raised in __del__ is dropped
        gc.collect()
        with pytest.raises(Interrupted) as caught:
            raise_if_interrupted()
    assert caught.value.signum == signum and caught.value.status == 128 + signum


def test_without_a_signal_the_check_does_nothing_and_leaving_forgets_the_signal() -> None:
    with interruptible():
        raise_if_interrupted()
    with pytest.raises(Interrupted):
        with interruptible():
            os.kill(os.getpid(), signal.SIGINT)
    raise_if_interrupted()  # outside: the signal of the block left is not raised again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_error_raised_in_place_of_a_signal_is_the_signal() -> None:
    """A library that swallows the interrupt and raises its own error instead: the signal's
    :class:`Interrupted` leaves, the library's error its cause."""
    with interruptible():
        with pytest.raises(Interrupted) as caught:
            with signal_first():
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                except KeyboardInterrupt:
                    raise AssertionError("the library's own") from None
    assert caught.value.signum == signal.SIGTERM and isinstance(caught.value.__cause__, AssertionError)


def test_teeth_without_a_signal_an_error_stays_itself() -> None:
    with interruptible():
        with pytest.raises(AssertionError):
            with signal_first():
                raise AssertionError("the target's finding")
