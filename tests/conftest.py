"""Shared test setup: the ``device`` fixture, the ``gpu`` marker, the
``--impl`` option (the implementation the fuzz tests target) and the
Hypothesis profiles ``ci``, ``dev`` and ``nightly``.

Without CUDA, Triton kernels run in its interpreter on CPU tensors; the
variable must be set before anything imports triton, hence here.
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``gpu``-marked tests when CUDA is absent."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
