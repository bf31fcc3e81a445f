"""Shared test fixtures: where KernelBench lives, and the `gpu` marker's skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def kernelbench_dir() -> Path:
    return Path(os.environ.get("KEVIN_KERNELBENCH_DIR", REPO_ROOT.parent / "shared" / "kernelbench_data"))


@pytest.fixture
def kernelbench() -> Path:
    path = kernelbench_dir()
    if not (path / "level1").is_dir():
        pytest.skip(f"KernelBench data not found at {path} (set KEVIN_KERNELBENCH_DIR)")
    return path


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # torch missing entirely: nothing GPU can run
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run with -m gpu on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
