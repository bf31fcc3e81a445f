"""Profiler feedback (kevin.evaluator.profiling): ncu's CSV parsed, reduced by hand-checked numbers,
bounded; the command lines; the torch.profiler fallback on CPU; `kevin profile`'s bad-input exits.

Two ncu reports are real (the H200, session 11), one is hand-made in ncu's raw-page layout for
round numbers (tests/data/profile/README.md); no test in this file needs a GPU or ncu."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kevin.cli import main
from kevin.evaluator.profiling import ncu, summary
from kevin.evaluator.profiling.run import ProfileConfig, find_ncu, profile, target_command

DATA = Path(__file__).resolve().parents[1] / "data" / "profile"
HANDMADE = DATA / "ncu_raw_HANDMADE.csv"
BUNDLED = Path(__file__).resolve().parents[2] / "kevin" / "tasks" / "bundled"

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return []
"""

PLAIN_CANDIDATE = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.mul(torch.relu(x), 2)
"""

BROKEN_CANDIDATE = """
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("no kernel for you")
"""

EXPECTED_SUMMARY = """\
Profile (ncu, 3 forward calls): 6 launches of 2 kernels, 18.3 us GPU time per forward.
1. gelu_kernel<float>: 1 launch per forward, 13.3 us each, 73% of GPU time
  DRAM 77.5% of peak (3.1 TB/s), compute (SM) 20.0% -> memory-bound
  occupancy 75.0% achieved of 100.0% theoretical, limited by registers; block (256, 1, 1), grid (4096, 1, 1)
  top stalls: long_scoreboard 60%, wait 20%, math_pipe_throttle 10%
2. row_sum_kernel: 1 launch per forward, 5 us each, 27% of GPU time
  DRAM 30.0% of peak (1.2 TB/s), compute (SM) 25.0% -> latency-bound (neither DRAM nor SM busy)
  occupancy 40.0% achieved of 50.0% theoretical, limited by shared_mem and warps; block (1024, 1, 1), grid (128, 1, 1)
  top stalls: barrier 75%, long_scoreboard 25%"""


def handmade_kernels() -> list[summary.KernelStats]:
    return summary.aggregate(ncu.parse_csv(HANDMADE.read_text()))


@pytest.mark.parametrize(
    ("report", "kernel", "ns", "reading"),
    [("ncu_raw_h200_gelu.csv", "gelu_tanh_vec4_kernel", 126e3, "memory-bound"),
     ("ncu_raw_h200_matmul.csv", "matmul_kernel", 4.22e6, "compute-bound")],
)  # fmt: skip
def test_a_real_h200_report_gives_every_line_of_the_summary(report, kernel, ns, reading):
    """ncu 2025.3.1's own raw page: 3 launches of one kernel, and every metric the summary reads is
    there (DRAM and SM throughput, bandwidth, occupancy with its limiter, launch shape, stalls)."""
    (stats,) = summary.aggregate(ncu.parse_csv((DATA / report).read_text()))
    assert stats.name == kernel and stats.launches == 3
    assert stats.total_ns / 3 == pytest.approx(ns, rel=0.01)
    assert stats.block_size == "(256, 1, 1)" and stats.grid_size
    for metric in (ncu.DRAM_PCT, ncu.DRAM_BYTES_PER_S, ncu.SM_PCT, ncu.ACHIEVED_OCCUPANCY_PCT, ncu.THEORETICAL_OCCUPANCY_PCT):
        assert metric in stats.metrics, metric
    assert summary.occupancy_limiters(stats.metrics) and len(summary.stall_shares(stats.metrics)) >= 3
    text = summary.summarize([stats], tool="ncu", forward_calls=3, max_chars=1200)
    assert len(text.splitlines()) == 5 and f"-> {reading}" in text and "top stalls: " in text, text


def test_the_raw_page_parses_into_launches_in_base_units():
    launches = ncu.parse_csv(HANDMADE.read_text())
    assert [launch.id for launch in launches] == [0, 1, 2, 3, 4, 5]
    first = launches[0]
    assert first.name == "void gelu_kernel<float>(float const*, float*, int)"
    assert first.block_size == "(256, 1, 1)" and first.grid_size == "(4096, 1, 1)"
    assert first.duration_ns == 10_000  # "10,000" nsecond
    assert first.metrics[ncu.DRAM_BYTES_PER_S] == pytest.approx(3.1e12)  # 3.10 Tbyte/second
    assert first.metrics["smsp__pcsamp_warps_issue_stalled_long_scoreboard"] == 1200  # "1,200"
    assert "Device" not in first.metrics and "CC" not in first.metrics
    assert ncu.SM_PCT not in launches[3].metrics  # "n/a" is left out, not read as 0


def test_kernels_are_aggregated_by_name_with_time_weighted_means():
    gelu, row_sum = handmade_kernels()
    assert (gelu.name, gelu.launches, gelu.total_ns) == ("gelu_kernel<float>", 3, 40_000)
    # DRAM 70, 70, 85 % over 10, 10, 20 us: (700 + 700 + 1700) / 40 = 77.5
    assert gelu.metrics[ncu.DRAM_PCT] == pytest.approx(77.5)
    assert (row_sum.name, row_sum.launches, row_sum.total_ns) == ("row_sum_kernel", 3, 15_000)
    assert row_sum.metrics[ncu.SM_PCT] == pytest.approx(25.0)  # the n/a launch does not count


def test_stalls_limiter_and_bound_reading_by_hand():
    gelu, row_sum = handmade_kernels()
    # average_warps family is preferred over pcsamp; selected (issuing) is not a stall:
    # 0.5 + 6 + 1 + 0.5 + 2 = 10 -> long_scoreboard 60%, wait 20%, math_pipe_throttle 10%
    assert summary.stall_shares(gelu.metrics)[:3] == [
        ("long_scoreboard", pytest.approx(60.0)),
        ("wait", pytest.approx(20.0)),
        ("math_pipe_throttle", pytest.approx(10.0)),
    ]
    assert summary.occupancy_limiters(gelu.metrics) == ["registers"]  # 6 blocks, the fewest
    assert summary.occupancy_limiters(row_sum.metrics) == ["shared_mem", "warps"]  # a tie at 4
    assert summary.bound_reading(gelu.metrics) == "memory-bound"
    assert summary.bound_reading(row_sum.metrics).startswith("latency-bound")
    assert summary.bound_reading({ncu.DRAM_PCT: 20.0, ncu.SM_PCT: 75.0}) == "compute-bound"
    assert summary.bound_reading({ncu.DRAM_PCT: 50.0, ncu.SM_PCT: 50.0}) == ""


def test_the_summary_reads_as_worked_out_by_hand():
    text = summary.summarize(handmade_kernels(), tool="ncu", forward_calls=3, max_chars=2000)
    assert text == EXPECTED_SUMMARY


def test_the_budget_drops_the_least_important_lines_first():
    kernels = handmade_kernels()
    full = summary.summarize(kernels, tool="ncu", forward_calls=3, max_chars=2000).splitlines()
    for budget in (900, 600, 400, 200, 120, 80):
        text = summary.summarize(kernels, tool="ncu", forward_calls=3, max_chars=budget)
        assert len(text) <= budget
        assert text.splitlines()[0] == full[0] or text.endswith("[cut by kevin]")
    # the second kernel goes before the first one's details; then its stalls, occupancy, memory
    text = summary.summarize(kernels, tool="ncu", forward_calls=3, max_chars=420)
    assert text.splitlines() == full[:5]
    text = summary.summarize(kernels, tool="ncu", forward_calls=3, max_chars=200)
    assert text.splitlines() == full[:2]
    assert summary.fit([(0, "x" * 100)], 80) == "x" * 65 + " [cut by kevin]"
    with pytest.raises(ValueError, match="max_chars must be at least"):
        summary.fit([(0, "x")], 10)


def test_kernel_names_are_shortened():
    assert summary.short_name("void k<a, b<c>>(float*, int)") == "k<a, b<c>>"
    assert summary.short_name("aten::mul") == "aten::mul"
    assert summary.short_name("x" * 100, limit=20) == "x" * 17 + "..."


_LAMBDAS = "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}"
_MUL = "at::native::binary_internal::MulFunctor<float> >"
_POW = (
    "at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>"
    "(at::TensorIteratorBase&, float)"
)
_MAX = "at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, float, 4, 4>"
_TANH = "at::native::tanh_kernel_cuda(at::TensorIteratorBase&)" + _LAMBDAS
_BINARY = "at::native::BinaryFunctor<float, float, float, " + _MUL
_UNARY = "at::native::AUnaryFunctor<float, float, float, " + _MUL


def _aten(kernel: str, functor: str, arrays: int) -> str:
    array = f"std::array<char*, {arrays}ul>"
    return f"void at::native::{kernel}<4, {functor}, {array} >(int, {functor}, {array})"


ATEN_KERNELS = {
    _aten("vectorized_elementwise_kernel", _BINARY, 3): "vectorized_elementwise_kernel<BinaryFunctor, "
    "MulFunctor>",
    _aten("vectorized_elementwise_kernel", _UNARY, 2): "vectorized_elementwise_kernel<AUnaryFunctor, "
    "MulFunctor>",
    _aten("vectorized_elementwise_kernel", _TANH, 2): "vectorized_elementwise_kernel<tanh_kernel_cuda>",
    _aten("vectorized_elementwise_kernel", _POW + "::{lambda(float)#1}", 2):
    "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>",
    f"void at::native::reduce_kernel<512, 1, {_MAX} >({_MAX})": "reduce_kernel<ReduceOp, MaxOps>",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
    "(float*, float const*, int, int, int, bool const*, int, bool)":
    "softmax_warp_forward<float, float, float, 10, false, false>",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)":
    "cunn_SoftMaxForward<SoftMaxForwardEpilogue>",
}


def test_torchs_long_kernel_names_keep_what_tells_them_apart():
    """Session 39: cut at 60 characters, six different ATen elementwise kernels of the optimize report's
    baseline all read `at::native::vectorized_elementwise_kernel<4, at::native::...`."""
    assert {summary.short_name(name) for name in ATEN_KERNELS} == set(ATEN_KERNELS.values())
    assert all(summary.short_name(name) == short for name, short in ATEN_KERNELS.items())


def test_kernels_whose_short_names_agree_keep_their_own_metrics():
    names = ["void k<float>(float*, " + "x" * 80 + ")", "void k<float>(double*, " + "y" * 80 + ")"]
    launches = [
        ncu.KernelLaunch(id=i, name=name, block_size="", grid_size="", metrics={ncu.DRAM_PCT: pct})
        for i, (name, pct) in enumerate(zip(names, (10.0, 90.0)))
    ]
    kernels = summary.aggregate(launches)
    assert sorted(k.metrics[ncu.DRAM_PCT] for k in kernels) == [10.0, 90.0]
    assert {k.name for k in kernels} == {"k<float>"}


def test_reports_ncu_cannot_give_are_told_apart():
    with pytest.raises(ncu.NcuParseError, match="no ncu CSV header"):
        ncu.parse_csv("==ERROR== ERR_NVGPUCTRPERM - no permission to access GPU performance counters\n")
    details = '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n"0","k","s","Duration","us","1"\n'
    with pytest.raises(ncu.NcuParseError, match="--page raw"):
        ncu.parse_csv(details)
    header_only = '"ID","Process ID","Kernel Name","gpu__time_duration.sum"\n"","","","nsecond"\n'
    assert ncu.parse_csv(header_only) == []
    assert summary.summarize([], tool="ncu", forward_calls=3, max_chars=200).endswith("no GPU kernels ran.")


def test_units_convert_to_base():
    assert (
        ncu.unit_scale("usecond") == 1e3 and ncu.unit_scale("ms") == 1e6 and ncu.unit_scale("second") == 1e9
    )
    assert ncu.unit_scale("Gbyte/second") == 1e9 and ncu.unit_scale("byte") == 1.0
    assert ncu.unit_scale("%") == 1.0 and ncu.unit_scale("cycle") == 1.0
    assert ncu.parse_number("1,234.5") == 1234.5 and ncu.parse_number("n/a") is None


def test_the_ncu_command_line():
    program = ["python", "-m", "kevin.evaluator.profiling.target", "p.py", "c.py"]
    command = ncu.ncu_command("/usr/bin/ncu", program, log_file="/tmp/r.csv", launch_count=50)
    assert command[0] == "/usr/bin/ncu" and command[-5:] == program
    text = " ".join(command)
    for part in (
        "--csv --page raw --print-units base",
        "--profile-from-start off",
        "--clock-control none",
        "--launch-count 50",
        "--log-file /tmp/r.csv",
        "--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats",
    ):
        assert part in text
    assert command[command.index("--metrics") + 1] == ",".join(ncu.METRICS)
    with pytest.raises(ValueError, match="launch_count"):
        ncu.ncu_command("ncu", program, log_file="x", launch_count=0)


def test_the_target_command_line():
    command = target_command(
        "py",
        "p.py",
        "c.py",
        backend="cuda",
        tool="torch",
        forward_calls=4,
        warmup_calls=1,
        cache_dir="/c",
        out="/o.json",
    )
    assert command == [
        "py", "-m", "kevin.evaluator.profiling.target", "p.py", "c.py", "--backend", "cuda", "--tool", "torch",
        "--forward-calls", "4", "--warmup", "1", "--cache-dir", "/c", "--out", "/o.json",
    ]  # fmt: skip


def test_config_is_checked_up_front():
    with pytest.raises(ValueError, match="tool ncu needs a GPU back end"):
        ProfileConfig(backend="cpp", tool="ncu")
    with pytest.raises(ValueError, match="max_chars must be at least"):
        ProfileConfig(max_chars=10)
    assert find_ncu("/nonexistent/ncu") is None


def test_torch_profiler_fallback_on_the_cpu(tmp_path):
    config = ProfileConfig(
        backend="cpp", forward_calls=2, warmup_calls=1, max_chars=400, cache_dir=str(tmp_path)
    )
    report = profile(PROBLEM, PLAIN_CANDIDATE, config)
    assert report.ok, report.error
    assert report.tool == "torch" and report.blame == "none"
    names = {kernel.name for kernel in report.kernels}
    assert {"aten::relu", "aten::mul"} <= names
    assert all(
        kernel.launches == 2 for kernel in report.kernels if kernel.name in ("aten::relu", "aten::mul")
    )
    lines = report.summary.splitlines()
    assert (
        lines[0].startswith("Profile (torch.profiler, 2 forward calls): ")
        and "CPU time per forward" in lines[0]
    )
    assert len(report.summary) <= 400
    assert json.loads(report.raw)  # torch.profiler's own table


def test_a_candidate_that_fails_is_blamed_not_raised(tmp_path):
    config = ProfileConfig(backend="cpp", forward_calls=1, warmup_calls=0, cache_dir=str(tmp_path))
    report = profile(PROBLEM, BROKEN_CANDIDATE, config)
    assert not report.ok and report.blame == "candidate"
    assert "RuntimeError: no kernel for you" in report.error


def test_a_profiler_past_its_deadline_is_infrastructure(tmp_path):
    slow = PLAIN_CANDIDATE.replace("import torch\n", "import time\nimport torch\ntime.sleep(30)\n", 1)
    config = ProfileConfig(backend="cpp", timeout_s=3, cache_dir=str(tmp_path))
    report = profile(PROBLEM, slow, config)
    assert report.blame == "infrastructure" and "did not finish within 3 s" in report.error


@pytest.mark.parametrize(
    "argv, message",
    [
        (["missing.py", "c.py"], "problem file not found"),
        (["{problem}", "{candidate}", "--backend", "cpp", "--max-chars", "10"], "max_chars must be at least"),
        (["{problem}", "{candidate}", "--backend", "cpp", "--tool", "ncu"], "tool ncu needs a GPU back end"),
        (["{problem}", "{candidate}", "--backend", "cpp", "--forward-calls", "0"], "forward_calls"),
        (["{problem}", "{candidate}", "--backend", "metal"], "invalid choice"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, message, tmp_path, capsys):
    problem = tmp_path / "p.py"
    candidate = tmp_path / "c.py"
    problem.write_text(PROBLEM)
    candidate.write_text(PLAIN_CANDIDATE)
    argv = [part.format(problem=problem, candidate=candidate) for part in argv]
    assert main(["profile", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_a_gpu_back_end_on_a_cpu_machine_exits_2(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    problem = BUNDLED / "tasks" / "01_gelu_tanh.py"
    candidate = BUNDLED / "cuda" / "01_gelu_tanh.py"
    assert main(["profile", str(problem), str(candidate), "--backend", "cuda"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_kevin_profile_prints_the_summary_and_writes_the_raw_table(tmp_path, capsys):
    problem = tmp_path / "p.py"
    candidate = tmp_path / "c.py"
    problem.write_text(PROBLEM)
    candidate.write_text(PLAIN_CANDIDATE)
    raw = tmp_path / "raw.json"
    argv = [
        str(problem),
        str(candidate),
        "--backend",
        "cpp",
        "--cache-dir",
        str(tmp_path),
        "--raw-out",
        str(raw),
    ]
    assert main(["profile", *argv, "--json", "--forward-calls", "1", "--warmup-calls", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tool"] == "torch" and report["error"] == "" and report["summary"].startswith("Profile (")
    assert json.loads(raw.read_text())


def test_the_gpu_table_lists_kernels_never_a_ranges_device_shadow():
    """Session 38 (H100): the baseline's table in `kevin optimize`'s report listed the forward's own
    range (`FORWARD_LABEL`) as a kernel at the forward's whole time, so the forward read twice as long."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from kevin.evaluator.profiling.target import FORWARD_LABEL, _torch_table

    def row(key, device, us, **marks):
        return SimpleNamespace(key=key, device_type=device, count=3, self_device_time_total=us, **marks)

    events = [
        row("gelu_kernel", DeviceType.CUDA, 300.0),
        row(FORWARD_LABEL, DeviceType.CUDA, 310.0, is_user_annotation=True),
        row("aten::gelu", DeviceType.CPU, 0.0),
    ]
    table = _torch_table(SimpleNamespace(key_averages=lambda: events), on_gpu=True)
    assert table == [{"name": "gelu_kernel", "launches": 3, "total_ns": 300e3}]
