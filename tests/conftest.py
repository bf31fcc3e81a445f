"""Shared test fixtures: where KernelBench lives, the `gpu` marker's skip, and one toolchain folder
for the whole run."""

from __future__ import annotations

import os
import sys
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


def pytest_configure(config):
    """Every test's evaluator shares one toolchain folder (kevin.evaluator.fastbuild.toolchain_root):
    the shim and the reference binding are built once for the run, not once per test's cache (each
    is most of a minute on 2 cores; CI built them ~40 times). The adversarial corpus's cache is the
    folder, as its tests already share it; subprocesses inherit the variable."""
    from kevin.evaluator.fastbuild import TOOLCHAIN_VARIABLE

    if TOOLCHAIN_VARIABLE not in os.environ:
        sys.path.insert(0, str(REPO_ROOT / "bench"))
        from adversarial import default_cache

        os.environ[TOOLCHAIN_VARIABLE] = str(default_cache())


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
