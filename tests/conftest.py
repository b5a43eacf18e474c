"""Shared test setup: the ``device`` fixture and the ``gpu`` marker.

Without CUDA, Triton kernels run in its interpreter on CPU tensors; the
variable must be set before anything imports triton, hence here.
"""

import os

import pytest
import torch

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
