"""Shared test setup: the ``device`` fixture, the ``gpu`` marker, the
``corpus`` marker, the ``--impl`` option (the implementation the fuzz tests
target) and the Hypothesis profiles ``ci``, ``dev`` and ``nightly``.

The ``corpus`` marker: a test that reads the vLLM corpus (``replayssm.spec.corpus``:
``$REPLAYSSM_CORPUS``, default ``../shared/reference``) carries it, and is skipped,
with the reason, where the corpus is absent. A test without it sees the setting
point at a folder that does not exist, so an unmarked reader fails everywhere,
child processes included. With ``CI=true`` an absent corpus stops the run before
any test: CI runs every test.

Without CUDA, Triton kernels run in its interpreter on CPU tensors; the
variable must be set before anything imports triton, hence here.
"""

import os
import signal

from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

from replayssm.spec import corpus

settings.register_profile("ci", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None)
settings.register_profile("nightly", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
# Triton picks interpreter or compiler per process: CPU tensors need the
# interpreter, CUDA tensors the compiler.
DEVICES = ["cpu"] if INTERPRETED else []
if torch.cuda.is_available() and not INTERPRETED:
    DEVICES.append(pytest.param("cuda", marks=pytest.mark.gpu))


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Every device the kernels can run on in this process."""
    return torch.device(request.param)


UNMARKED = Path("/nonexistent/replayssm-corpus (this test lacks the corpus marker)")
"""Where the corpus setting points during a test without the ``corpus`` marker."""


def pytest_configure(config: pytest.Config) -> None:
    """With ``CI=true`` the corpus must be here (a CI run skips no corpus test)."""
    if os.environ.get("CI") == "true" and not corpus.present():
        raise pytest.UsageError(f"CI=true but {corpus.missing()}: CI runs every test, the corpus tests included")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``gpu``-marked tests when CUDA is absent, ``corpus``-marked ones when the corpus is."""
    skips = {}
    if not torch.cuda.is_available():
        skips["gpu"] = pytest.mark.skip(reason="needs CUDA")
    if not corpus.present():
        skips["corpus"] = pytest.mark.skip(reason=f"needs the corpus: {corpus.missing()}")
    for item in items:
        for marker, skip in skips.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def corpus_only_where_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test without the ``corpus`` marker finds no corpus (the setting names :data:`UNMARKED`)."""
    if request.node.get_closest_marker("corpus") is None:
        monkeypatch.setenv(corpus.SETTING, str(UNMARKED))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--impl", default=None, metavar="MODULE_OR_FILE",
                     help="implementation the fuzz tests drive (default: replayssm.impl.replayssm_utils)")


@pytest.fixture()
def impl_target(request: pytest.FixtureRequest) -> str | None:
    """The ``--impl`` the fuzz tests target."""
    return request.config.getoption("--impl")


@pytest.fixture(autouse=True)
def proof_cache_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test's ``prove`` gets a fresh, empty proof cache of its own:
    never the user's, and never a proof kept by another test (which may have
    planted a bug in the spec)."""
    folder = tmp_path_factory.mktemp("proof-cache")
    monkeypatch.setenv("REPLAYSSM_VERIFY_CACHE", str(folder))
    return folder


# A run started with SIGINT ignored (``nohup ... &`` from a non-interactive shell; Python then installs no
# handler of its own) would leave the tests' SIGINT ignored, here and, inherited through exec, in every
# process a test starts: the suite's signal tests would fail for that alone. SIGINT gets Python's default
# handler back in this process, so a child starts with the default disposition (tests/test_suite_signals.py).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
