"""`kevin optimize` end to end through the real evaluator (cpp back end) and the real command: recorded
completions improve a bundled task's kernel over two turns (a slow row sum, then a fast one), the
winner is re-verified with a fresh seed and at other shapes, and the drop-in it writes imports and
computes what Model computes. One C++ extension serves both kernels, so the run builds once (plus
kevin's fast-build shim, once per cache): a few minutes on a small CPU, hence `slow`."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import textwrap

import pytest

import kevin.evaluator.commands
from kevin.cli import main
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import bundled_dir

pytestmark = pytest.mark.slow

CANDIDATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
torch::Tensor row_sum(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "row_sum: a 2-D float32 tensor");
    auto input = x.contiguous();
    const int64_t rows = input.size(0), cols = input.size(1);
    auto output = torch::empty({rows}, input.options());
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double total = 0.0;
        for (int64_t c = 0; c < cols; ++c) total += in[r * cols + c];
        out[r] = static_cast<float>(total);
    }
    return output;
}

// The same sums 16 times over, each in another order (so no compiler can merge them), averaged.
torch::Tensor row_sum_slow(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "row_sum: a 2-D float32 tensor");
    auto input = x.contiguous();
    const int64_t rows = input.size(0), cols = input.size(1);
    auto output = torch::empty({rows}, input.options());
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double total = 0.0;
        for (int64_t rep = 0; rep < 16; ++rep) {
            double sum = 0.0;
            for (int64_t c = 0; c < cols; ++c) sum += in[r * cols + (c + rep) % cols];
            total += sum;
        }
        out[r] = static_cast<float>(total / 16.0);
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_test_optimize_row_sum",
    cpp_sources=CPP_SOURCE,
    functions=["row_sum", "row_sum_slow"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.FUNCTION(x)
'''


def answer(function: str, summary: str) -> str:
    source = CANDIDATE.replace("FUNCTION", function)
    return f"<think>Sum each row.</think>\n```python\n{source}```\n{summary}"


def test_optimize_improves_a_bundled_kernel_and_writes_a_verified_drop_in(tmp_path, monkeypatch, capsys):
    module = tmp_path / "row_sum.py"
    shutil.copy(bundled_dir() / "02_row_sum.py", module)
    records = tmp_path / "records.jsonl"
    completions = {
        1: answer("row_sum_slow", "Sixteen passes per row."),
        2: answer("row_sum", "One pass per row."),
    }
    records.write_text(
        "".join(
            json.dumps({"task": "row_sum", "trajectory": 0, "turn": turn, "completion": text}) + "\n"
            for turn, text in completions.items()
        )
    )
    cache = tmp_path / "cache"
    real_config = kevin.evaluator.commands.config_from_args

    def config_from_args(args):  # the command's config, kept off the machine's shared lock and cache
        return dataclasses.replace(
            real_config(args),
            lock_dir=str(tmp_path),
            workdir_root=str(tmp_path),
            timing=TimingConfig(budget_ms=100, warmup_ms=10),
        )

    monkeypatch.setattr(kevin.evaluator.commands, "config_from_args", config_from_args)
    argv = ["optimize", str(module), "--replay", str(records), "--trajectories", "1", "--turns", "2"]
    argv += ["--backend", "cpp", "--jobs", "1", "--cache-dir", str(cache), "--verify-shapes", "rows=64"]
    assert main(argv) == 0, capsys.readouterr()
    out = capsys.readouterr().out

    out_dir = tmp_path / "row_sum_kevin"
    rows = [json.loads(line) for line in (out_dir / "episodes.jsonl").read_text().splitlines()]
    assert [(r["turn"], r["verdict"]["stage"]) for r in rows] == [(1, "ok"), (2, "ok")], [
        r["verdict"]["error"] for r in rows
    ]
    slow, fast = (r["verdict"]["speedup"] for r in rows)
    assert fast > 2 * slow, (slow, fast)  # the second turn's kernel is the faster one
    assert f"turn 1/2: 1 attempts, 1 passed, best {slow:.2f}x (so far {slow:.2f}x)" in out
    assert f"turn 2/2: 1 attempts, 1 passed, best {fast:.2f}x (so far {fast:.2f}x)" in out

    result = json.loads((out_dir / "result.json").read_text())
    assert result["winner"] == {"trajectory": 0, "turn": 2, "speedup": fast, "file": "row_sum_kevin.py"}
    (kernel,) = result["verification"]
    assert [check["label"] for check in kernel["checks"]] == ["fresh seed", "rows=64"]
    assert all(check["verdict"]["stage"] == "ok" for check in kernel["checks"]), kernel
    for name in ("report.md", "report.png", "config.json"):
        assert (out_dir / name).is_file()

    # The drop-in imports and computes Model's output (its C++ built by kevin's fast path, whose shim
    # the evaluation above left in the cache).
    dropin = out_dir / "row_sum_kevin.py"
    assert dropin.read_text().endswith(rows[1]["candidate"])
    check = textwrap.dedent(
        f"""
        import importlib.util, pathlib, torch
        from kevin.evaluator.build import BuildLog, install
        install(pathlib.Path({str(cache)!r}) / "builds", BuildLog())

        def load(name, path):
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module

        problem = load("row_sum", {str(module)!r})
        dropin = load("row_sum_kevin", {str(dropin)!r})
        x = problem.get_inputs()
        expected = problem.Model(*problem.get_init_inputs())(*x)
        print(torch.allclose(dropin.ModelNew(*problem.get_init_inputs())(*x), expected, rtol=1e-4, atol=1e-4))
        """
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=600)
    assert done.stdout.strip() == "True", done.stderr[-2000:]
