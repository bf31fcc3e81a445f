"""The runner loads a candidate from its text (kevin.evaluator.worker.support.load_module), never
from a file; what reads a function's source back must still find it: `@triton.jit` does, at
decoration (s15 on the H200: every Triton candidate failed at load without it)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from kevin.evaluator.worker.support import forget_module, load_module

BUNDLED_TRITON = Path(__file__).resolve().parents[2] / "kevin" / "tasks" / "bundled" / "triton"

SOURCE = '''import math


def scaled(x):
    """A candidate's helper."""
    return x * math.pi


class ModelNew:
    def forward(self, x):
        return scaled(x)
'''


def test_a_loaded_modules_functions_have_their_source():
    module = load_module(SOURCE, "kevin_test_model", "<model>")
    try:
        assert inspect.getsource(module.scaled) == SOURCE[SOURCE.index("def scaled") : SOURCE.index("\n\n\nclass")] + "\n"
        lines, start = inspect.getsourcelines(module.ModelNew.forward)
        assert start == 10 and lines[0].strip() == "def forward(self, x):"
        # a second candidate under the same file name replaces the first one's lines
        other = load_module(SOURCE.replace("math.pi", "math.e"), "kevin_test_model", "<model>")
        assert "math.e" in inspect.getsource(other.scaled)
    finally:
        forget_module("kevin_test_model")


def test_a_traceback_through_a_loaded_module_shows_its_line():
    import traceback

    module = load_module("def boom():\n    raise ValueError('from the candidate')\n", "kevin_test_boom", "<model>")
    try:
        with pytest.raises(ValueError) as caught:
            module.boom()
        text = "".join(traceback.format_exception(caught.value))
        assert "raise ValueError('from the candidate')" in text
    finally:
        forget_module("kevin_test_boom")


@pytest.mark.parametrize("path", sorted(BUNDLED_TRITON.glob("*.py")), ids=lambda p: p.stem)
def test_bundled_triton_candidates_load_as_the_runner_loads_them(path):
    """Decoration only (no GPU): `@triton.jit` reads each kernel's source when the module loads."""
    pytest.importorskip("triton")
    module = load_module(path.read_text(), "kevin_test_triton", "<model>")
    try:
        assert isinstance(module.ModelNew, type)
    finally:
        forget_module("kevin_test_triton")
