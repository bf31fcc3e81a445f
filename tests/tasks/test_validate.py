"""`kevin tasks validate`: statuses of our own broken, nondeterministic and degenerate problems.

The problems live in tests/data/problems (ids L0_1 .. L0_11); each file's docstring says what
validate must call it. One CLI run over all of them (module fixture) keeps the suite fast.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import time
from pathlib import Path

import pytest
import torch

from kevin.cli import main
from kevin.tasks import probe as validate_child
from kevin.tasks import validate
from kevin.tasks.records import Task
from kevin.tasks.validate import (
    ATOL,
    ValidationResult,
    classify_outputs,
    estimate_footprint_bytes,
    format_summary,
    format_table,
    input_fingerprint,
    outputs_close,
    peak_abs,
    summarize,
    zero_would_pass,
)

PROBLEMS = Path(__file__).parents[1] / "data" / "problems"
TIMEOUT_S = 5

EXPECTED = {
    "L0_1": ("ok", ""),
    "L0_2": ("import_error", "No module named 'kevin_module_that_does_not_exist'"),
    "L0_3": ("import_error", "missing get_inputs"),
    "L0_4": ("run_error", "forward: RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
    "L0_5": ("nondeterministic", "two forward passes on the same inputs differ"),
    "L0_6": ("degenerate", "an all-zero output would pass"),
    "L0_7": ("degenerate", "two different random inputs give the same output"),
    "L0_8": ("skipped", "too large for cpu: ~8.000 GiB of inputs + parameters > 1.000 GiB budget"),
    "L0_9": ("timeout", f"no verdict within {TIMEOUT_S} s"),
    "L0_10": ("run_error", "exited with code 0 without a verdict"),
    "L0_11": ("run_error", "process killed by SIGSEGV"),
}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    """The JSON report of one `kevin tasks validate` run over every test problem."""
    out = tmp_path_factory.mktemp("validate") / "report.json"
    argv = [
        "tasks",
        "validate",
        "--source",
        str(PROBLEMS),
        "--timeout-s",
        str(TIMEOUT_S),
        "--jobs",
        "2",
        "--json",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("task_id", sorted(EXPECTED))
def test_each_problem_gets_its_status_and_reason(report: dict, task_id: str):
    row = next(r for r in report["results"] if r["task_id"] == task_id)
    status, reason = EXPECTED[task_id]
    assert row["status"] == status, row
    assert reason in row["reason"] if reason else row["reason"] == "", row


def test_report_counts_every_status_and_records_settings(report: dict):
    assert sum(report["summary"].values()) == len(EXPECTED) == len(report["results"])
    assert report["summary"] == {
        "ok": 1,
        "import_error": 2,
        "run_error": 3,
        "timeout": 1,
        "nondeterministic": 1,
        "degenerate": 2,
        "skipped": 1,
    }
    assert report["settings"]["device"] == "cpu" and report["settings"]["budget_bytes"] == 1 << 30
    huge = next(r for r in report["results"] if r["task_id"] == "L0_8")
    assert huge["footprint_bytes"] == 65536 * 32768 * 4


def test_timeout_excludes_start_up_and_kills_the_child(report: dict):
    hang = next(r for r in report["results"] if r["task_id"] == "L0_9")
    assert TIMEOUT_S <= hang["elapsed_s"] < TIMEOUT_S + validate.STARTUP_ALLOWANCE_S


def test_table_output_and_exit_code(capsys):
    argv = ["tasks", "validate", "--source", str(PROBLEMS), "--ids", "8", "--timeout-s", "60"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == ["id", "name", "status", "MiB", "time_s", "reason"]
    assert lines[1].split()[:4] == ["L0_8", "huge_inputs", "skipped", "8192"]
    assert lines[-1] == "summary: 1 skipped (1 problems)"
    assert "[1/1] L0_8 skipped" in captured.err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--timeout-s", "0"], "--timeout-s must be positive"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--budget-gib", "-1"], "--budget-gib must be positive"),
        (["--device", "tpu"], "invalid choice"),
        (["--ids", "x"], "bad --ids"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, extra, message):
    assert main(["tasks", "validate", "--source", str(PROBLEMS), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kevin: error: ") and err.count("\n") == 1 and message in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_cuda_without_a_gpu_is_a_usage_error(capsys):
    assert main(["tasks", "validate", "--source", str(PROBLEMS), "--device", "cuda"]) == 2
    assert "no CUDA GPU is visible" in capsys.readouterr().err


def test_death_reasons_name_the_signal_or_the_last_output():
    assert validate._death_reason(-signal.SIGKILL, "") == "process killed by SIGKILL (out of memory?)"
    assert validate._death_reason(3, "warming up\nValueError: bad\n\n") == (
        "process exited with code 3 without a verdict; last output: ValueError: bad"
    )


# --- the pure checks, in this process ------------------------------------------------------------


def import_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"test_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_footprint_is_sized_on_meta_without_allocating():
    start = time.monotonic()
    footprint, note = estimate_footprint_bytes(
        import_module(PROBLEMS / "8_huge_inputs.py"), budget_bytes=1 << 30
    )
    assert footprint == 65536 * 32768 * 4 and note == "output not sized"
    assert time.monotonic() - start < 5  # 8 GiB of torch.rand would take far longer on this CPU
    small, note = estimate_footprint_bytes(import_module(PROBLEMS / "1_ok_linear_relu.py"))
    inputs, params, output = 8 * 32 * 4, (32 * 16 + 16) * 4, 8 * 16 * 4
    assert (small, note) == (inputs + params + output, "")


def test_zero_would_pass_at_the_tolerance_boundary():
    assert zero_would_pass([torch.full((3,), ATOL)])
    assert not zero_would_pass([torch.full((3,), 2 * ATOL)])
    assert not zero_would_pass([torch.tensor([0.0, -5.0]), torch.zeros(2)])
    assert zero_would_pass([torch.zeros(4, dtype=torch.int64)])
    assert peak_abs(torch.tensor([True, False])) == 1.0 and peak_abs(torch.tensor([-7, 3])) == 7.0


def test_outputs_close_compares_shapes_values_and_integers(monkeypatch):
    a = torch.rand(4, 4)
    assert outputs_close([a], [a + ATOL / 10])
    assert not outputs_close([a], [a + 0.01])
    assert not outputs_close([a], [a.reshape(16)])
    assert not outputs_close([a], [a, a])
    assert outputs_close([torch.tensor([1, 2])], [torch.tensor([1, 2])])
    assert not outputs_close([torch.tensor([1, 2])], [torch.tensor([1, 3])])
    assert outputs_close([torch.tensor(2.0)], [torch.tensor(2.0)])
    monkeypatch.setattr(validate_child, "CHUNK_ELEMENTS", 5)  # several chunks, on a non-contiguous view
    big = torch.rand(6, 7).t()
    changed = big.clone()
    changed[-1, -1] += 1.0
    assert outputs_close([big], [big.clone()]) and not outputs_close([big], [changed])


def test_classify_outputs_names_each_failure():
    x, y = torch.rand(16) + 1.0, torch.rand(16) + 1.0
    assert classify_outputs([x], [y]) == ("ok", "")
    assert classify_outputs([torch.empty(0)], None)[0] == "degenerate"
    assert classify_outputs([], None)[0] == "degenerate"
    nan = torch.tensor([float("nan"), 1.0])
    assert classify_outputs([nan], [x[:2]]) == ("degenerate", "output contains NaN or inf")
    assert classify_outputs([torch.tensor([1.0, float("inf")])], None)[1] == "output contains NaN or inf"
    assert "all-zero" in classify_outputs([x * 1e-6], [y * 1e-6])[1]
    assert "two different random inputs" in classify_outputs([x], [x + ATOL / 10])[1]
    assert classify_outputs([x], None) == ("ok", "get_inputs ignores the seed; input dependence not checked")


def test_input_fingerprint_tells_seeded_draws_apart():
    torch.manual_seed(0)
    first = [torch.rand(8, 8), 3]
    torch.manual_seed(1)
    assert input_fingerprint(first) != input_fingerprint([torch.rand(8, 8), 3])
    assert input_fingerprint(first) == input_fingerprint([first[0].clone(), 3])
    assert input_fingerprint([torch.ones(2)]) != input_fingerprint([torch.ones(3)])


def test_table_and_summary_formatting():
    results = [
        ValidationResult("L1_19", 1, "ReLU", "skipped", "too large", 1.25, 3 << 30),
        ValidationResult("L1_2", 1, "Matmul", "ok", "", 4.0, None),
    ]
    lines = format_table(results).splitlines()
    assert lines[1].split() == ["L1_19", "ReLU", "skipped", "3072", "1.2", "too", "large"]
    assert lines[2].split() == ["L1_2", "Matmul", "ok", "?", "4.0"]
    assert summarize(results)["ok"] == 1 and summarize(results)["timeout"] == 0
    assert format_summary(results) == "summary: 1 ok, 1 skipped (2 problems)"


_DRAWN_ON_THE_DEVICE = '''
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        assert torch.empty(0).device.type in ("cuda", "meta"), "Model built off the device"
        self.scale = torch.nn.Parameter(torch.rand(8))

    def forward(self, x):
        return x * self.scale


def get_inputs():
    x = torch.rand(4, 8)
    assert x.device.type in ("cuda", "meta"), "inputs drawn off the device"  # meta: the footprint's
    return [x]


def get_init_inputs():
    return []
'''


@pytest.mark.gpu
def test_on_a_gpu_the_model_is_built_and_its_inputs_drawn_on_the_device():
    """Session 38: L1_4's and L1_5's 30 s went on drawing gigabytes of inputs with the CPU's generator
    before copying them over; a problem's factories now run under the device, so this one is `ok`."""
    task = Task.from_source(_DRAWN_ON_THE_DEVICE, id="L0_99", name="drawn_on_the_device")
    settings = validate_child.ValidateSettings(device="cuda", timeout_s=60, budget_bytes=validate.GIB, seed=0)
    result = validate.validate_task(task, settings)
    assert (result.status, result.reason) == ("ok", "")


def test_outputs_stay_on_the_device_they_were_made_on():
    """Compared where they are: a meta model's outputs come back on meta (a copy to the host fails there)."""
    model = torch.nn.Linear(4, 3).to("meta")
    outputs = validate_child._forward(model, [torch.empty(2, 4, device="meta")], "meta")
    assert [(t.device.type, tuple(t.shape)) for t in outputs] == [("meta", (2, 3))]
