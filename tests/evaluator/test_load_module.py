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


INTERPRETED = """
import json, sys
import torch
from kevin.evaluator.evaluate import EvalConfig
from kevin.evaluator.worker.support import forget_module, load_module
from kevin.tasks import Task

atol, rtol = EvalConfig(backend="triton").tolerances
report = {}
for task_path, candidate_path in json.loads(sys.argv[1]):
    task = Task.from_source(open(task_path).read(), id="t", name="t")
    reference = load_module(task.source, "kevin_test_reference", "<reference>")
    candidate = load_module(open(candidate_path).read(), "kevin_test_triton", "<model>")
    init = reference.get_init_inputs()
    torch.manual_seed(1)
    model = reference.Model(*init)
    torch.manual_seed(1)
    new = candidate.ModelNew(*init)
    new.load_state_dict(model.state_dict())
    torch.manual_seed(2)
    inputs = reference.get_inputs()
    with torch.no_grad():
        want, got = model(*inputs), new(*inputs)
    report[candidate_path] = [bool(torch.allclose(got, want, atol=atol, rtol=rtol)), float((got - want).abs().max())]
    forget_module("kevin_test_triton")
    forget_module("kevin_test_reference")
print(json.dumps(report))
"""


def test_bundled_triton_candidates_compute_their_tasks_in_tritons_interpreter():
    """Each bundled Triton candidate, loaded as the runner loads it, against its task's reference at
    the small size and the evaluator's fp32 tolerance: Triton's interpreter (TRITON_INTERPRET=1) runs
    the kernels on the CPU, so a wrong kernel fails here before it costs GPU time."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    tasks = BUNDLED_TRITON.parent / "tasks"
    pairs = [[str(tasks / path.name), str(path)] for path in sorted(BUNDLED_TRITON.glob("[0-9][0-9]_*.py"))]
    assert len(pairs) == 12
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", INTERPRETED, json.dumps(pairs)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    wrong = {Path(path).stem: error for path, (close, error) in report.items() if not close}
    assert len(report) == 12 and not wrong, wrong
