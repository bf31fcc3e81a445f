"""The evaluator end to end on the CPU (cpp back end): every failure family gets the right stage.

All candidates here share one C++ extension (same name, same sources), so the build cache makes
one ~45 s compile serve the whole module; each candidate picks a different function of it.
The static gate is off: these tests are about the sandbox, the checker and the clock.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import pytest

from kevin.evaluator.evaluate import EvalConfig, evaluate
from kevin.evaluator.fastbuild import TOOLCHAIN_VARIABLE
from kevin.evaluator.sandbox import Limits
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import Task

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data" / "eval"

CPP = r"""
#include <torch/extension.h>
#include <cstdio>

torch::Tensor scale_relu(torch::Tensor x, double scale) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < input.numel(); ++i) {
        float v = in[i] * static_cast<float>(scale);
        o[i] = v > 0.f ? v : 0.f;
    }
    return out;
}

torch::Tensor scale_only(torch::Tensor x, double scale) {   // forgets the relu: wrong
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    for (int64_t i = 0; i < input.numel(); ++i)
        out.data_ptr<float>()[i] = input.data_ptr<float>()[i] * static_cast<float>(scale);
    return out;
}

torch::Tensor crash(torch::Tensor x, double scale) {
    volatile float* p = nullptr;
    *p = 1.0f;                                              // SIGSEGV
    return x;
}

torch::Tensor spin(torch::Tensor x, double scale) {
    volatile long long i = 0;
    while (true) { i = i + 1; }                             // never returns
    return x;
}

torch::Tensor in_place(torch::Tensor x, double scale) {     // right answer, but clobbers its input
    float* p = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) { float v = p[i] * static_cast<float>(scale); p[i] = v > 0.f ? v : 0.f; }
    return x.clone();
}

torch::Tensor lib_relu(torch::Tensor x, double scale) {     // the work done by ATen, called from C++
    return torch::relu(x * scale);
}

torch::Tensor zeros(torch::Tensor x, double scale) {        // does nothing: zeros of the right shape
    return torch::zeros_like(x);
}

torch::Tensor low_precision(torch::Tensor x, double scale) { // right formula, 10-bit mantissa (TF32-like)
    auto out = scale_relu(x, scale);
    uint32_t* bits = reinterpret_cast<uint32_t*>(out.data_ptr<float>());
    for (int64_t i = 0; i < out.numel(); ++i) bits[i] &= 0xFFFFE000u;
    return out;
}

torch::Tensor spam(torch::Tensor x, double scale) {
    for (int i = 0; i < 200000; ++i) std::printf("spam spam spam spam spam spam spam spam %d\n", i);
    std::fflush(stdout);
    return scale_relu(x, scale);
}
"""

FUNCTIONS = [
    "scale_relu",
    "scale_only",
    "crash",
    "spin",
    "in_place",
    "spam",
    "lib_relu",
    "zeros",
    "low_precision",
]


def candidate(call: str, prelude: str = "", body: str = "") -> str:
    return f"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
{prelude}
ext = load_inline(name="kevin_test_ext", cpp_sources={CPP!r}, functions={FUNCTIONS!r})


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
{body or ""}        return ext.{call}(x, self.scale)
"""


@pytest.fixture(scope="module")
def task() -> Task:
    source = (DATA / "problem_scale_relu.py").read_text()
    return Task.from_source(source, id="scale_relu", name="scale_relu")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("kevin-cache"))


@pytest.fixture
def config(cache_dir, tmp_path) -> EvalConfig:
    limits = Limits(
        stage_timeouts_s={
            "setup": 60,
            "compile": 600,
            "wait_gpu": 600,
            "inputs": 60,
            "correctness": 20,
            "timing": 30,
            "reference": 60,
            "baseline": 60,
            "done": 10,
        },
        host_memory_bytes=3 * 2**30,
    )
    return EvalConfig(
        backend="cpp",
        cache_dir=cache_dir,
        lock_dir=str(tmp_path),
        static_check=False,
        timing=TimingConfig(budget_ms=100, warmup_ms=10),
        limits=limits,
        workdir_root=str(tmp_path),
    )


def assert_clean(tmp_path: Path) -> None:
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("kevin-job-")]
    assert leftovers == [], f"job directories left behind: {leftovers}"


def test_honest_candidate_is_correct_and_timed(task, config, tmp_path):
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.stage == "ok", result.error + result.log
    assert result.correct and result.passed and result.compiled
    assert result.blame == "none" and result.flags == []
    assert result.speedup is not None and result.speedup > 0
    assert result.runtime_ms > 0 and result.baseline_ms > 0
    assert result.timing["n"] >= 10 and result.timing["clock"] == "judge_cycle"
    assert result.correctness["trials_passed"] == config.trials + config.distribution_trials
    assert "correct" in result.feedback.lower()
    # The runner started while the judge loaded the reference; each start says where its time went.
    (started, control_started) = result.checks["runner_start_s"]
    assert {"ready", "import", "boot", "profiler"} <= set(started)
    assert "profiler" not in control_started  # never traced: it skips the profiler's warm-up
    assert started["ready"] >= started["boot"] > started["import"] >= 0
    # Both were forked from the judge (kevin.evaluator.spawn, fork mode) with torch imported: the
    # runner's own import of it costs nothing (an exec'd runner's took ~1 s here, seconds on the H200).
    assert result.checks["confinement"]["forked"] and started["import"] < 0.05
    # Its judge had imported what the profiler's first start imports (torch._inductor and the rest).
    assert started["profiler_imports"] == 0
    # The verdict's timeline (bench/step_timeline.py): the job, then the stages in order, the end.
    timeline = result.checks["timeline"]
    names, times = zip(*timeline["stages"])
    assert names[0] == "job" and {"correctness", "timing"} <= set(names), names
    assert list(times) == sorted(times) and timeline["end"] >= times[-1] and timeline["t0"] > 1e9
    for kind, asked, held, released in timeline["device"]:
        assert kind in ("admit", "shared", "exclusive") and asked <= held
        assert released is None or held <= released <= timeline["end"]
    assert set(result.checks["settled"]) == {"calibrate candidate", "timing candidate", "bracket candidate", "timing baseline", "bracket baseline"}
    # The judge and its runners timed on one core (kevin.evaluator.cores.cpu_timing_core).
    seat = result.checks["timing_cores"]
    if len(os.sched_getaffinity(0)) < 2:
        assert seat == "unpinned"
    else:
        assert seat["judge"] == seat["runners"], seat
    # The overhead taken off was measured around the timed calls, in the runner that then timed the
    # baseline (no third runner started).
    assert set(result.checks["overhead_ms"]) == {"candidate", "baseline"}
    assert result.timing["overhead_ms"] == pytest.approx(result.checks["overhead_ms"]["candidate"]["bracket"], abs=1e-4)
    assert_clean(tmp_path)


def test_asked_to_the_control_runner_warms_the_profiler_like_the_candidates(task, config, monkeypatch):
    """KEVIN_CONTROL_PROFILER=1 (kevin.evaluator.probes): both sides of a timing share the profiler's
    start, a diagnostic for the candidate's runner's slower fetches (issue #19)."""
    monkeypatch.setenv("KEVIN_CONTROL_PROFILER", "1")
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.passed, result.error + result.log
    (started, control_started) = result.checks["runner_start_s"]
    assert "profiler" in started and "profiler" in control_started


@pytest.mark.parametrize("after", [False, True], ids=["trace_first", "trace_after_timing"])
def test_asked_the_candidate_is_traced_after_its_timing_with_the_same_verdict(task, config, monkeypatch, after):
    """KEVIN_TRACE_AFTER_TIMING=1 (kevin.evaluator.probes): the library check's trace runs after the
    timing, so the calls and fetches are timed in a runner that has profiled nothing yet (a
    diagnostic for the candidate's runner's slower fetches, issue #19). It still reaches the worker
    through its scrubbed environment, still traces, and the verdict is the same."""
    monkeypatch.setenv("KEVIN_TRACE_AFTER_TIMING", "1" if after else "0")
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.passed and result.flags == [], result.error + result.log
    assert result.checks["trace"]["traced_calls"] >= 1 and "library_share" in result.checks["trace"]
    names = [stage[0] for stage in result.checks["timeline"]["stages"]]
    timing = names.index("timing")
    assert ("correctness" in names[timing:]) is after, names
    assert "correctness" in names[:timing], names  # the trials stay before the timing either way


def test_with_forks_switched_off_the_runners_start_afresh_and_judge_alike(task, config, monkeypatch):
    """KEVIN_RUNNER_FORK=0 reaches the worker through its scrubbed environment: its runners are
    executed afresh (each imports torch itself) and the verdict is the same."""
    monkeypatch.setenv("KEVIN_RUNNER_FORK", "0")
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.stage == "ok" and result.correct, result.error + result.log
    assert result.checks["confinement"]["forked"] is False
    assert all(started["import"] > 0.05 for started in result.checks["runner_start_s"])


def test_a_fresh_cache_builds_no_shim_or_reference_when_a_toolchain_folder_is_shared(config, tmp_path):
    """KEVIN_TOOLCHAIN_DIR (tests/conftest.py sets it for the run) reaches the worker through its
    scrubbed environment, where the broker builds: a new cache does not build kevin's shim and
    reference binding again (a full torch extension build each, most of a minute on 2 cores). The
    bundled GELU takes the fast build: seconds in a fresh cache once the shim exists."""
    shared = Path(os.environ[TOOLCHAIN_VARIABLE])
    fresh = tmp_path / "fresh-cache"
    bundled = Path(__file__).parents[2] / "kevin" / "tasks" / "bundled"
    task = Task.from_source((bundled / "tasks" / "01_gelu_tanh.py").read_text(), id="gelu", name="gelu")
    source = (bundled / "cpp" / "01_gelu_tanh.py").read_text()
    result = evaluate(task, source, dataclasses.replace(config, cache_dir=str(fresh)))
    assert result.passed, result.explain()
    assert not (fresh / "shims").exists() and not (fresh / "symbols").exists()
    assert list((shared / "shims").glob("*/.kevin-complete"))


def test_second_evaluation_hits_the_build_cache(task, config):
    evaluate(task, candidate("scale_relu"), config)
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.timing.get("build_cache_hit") is True
    assert result.stage_seconds["build"] < 5


def test_wrong_output_is_a_correctness_failure(task, config, tmp_path):
    result = evaluate(task, candidate("scale_only"), config)
    assert result.stage == "correctness" and result.compiled and not result.correct
    assert result.blame == "candidate" and result.speedup is None
    assert "outside tolerance" in result.error and "max abs error" in result.error
    assert "wrong output" in result.feedback
    assert_clean(tmp_path)


def test_segfault_is_a_runtime_failure_and_the_next_evaluation_is_healthy(task, config, tmp_path):
    result = evaluate(task, candidate("crash"), config)
    assert result.stage == "runtime" and result.compiled and not result.correct
    assert "SIGSEGV" in result.error and result.blame == "candidate"
    healthy = evaluate(task, candidate("scale_relu"), config)
    assert healthy.stage == "ok"
    assert_clean(tmp_path)


def test_native_infinite_loop_times_out(task, config, tmp_path):
    result = evaluate(task, candidate("spin"), config)
    assert result.stage == "timeout" and result.blame == "candidate"
    assert "correctness" in result.error
    # The hang itself, not the build (slow on a loaded CI machine) or the shim (a fresh cache).
    assert result.stage_seconds["correctness"] < 15, result.stage_seconds
    assert_clean(tmp_path)


def test_python_infinite_loop_times_out(task, config):
    result = evaluate(task, candidate("scale_relu", body="        while True:\n            pass\n"), config)
    assert result.stage == "timeout" and "correctness" in result.error


def test_compile_error_is_reported_with_the_compiler_message(task, config, tmp_path):
    broken = (
        candidate("scale_relu")
        .replace("kevin_test_ext", "kevin_test_broken")
        .replace("return out;\\n}", "return out  // missing semicolon\\n}", 1)
    )
    result = evaluate(task, broken, config)
    assert result.stage == "compile" and not result.compiled and result.blame == "candidate"
    assert "error" in result.feedback.lower()
    assert "Compilation failed" in result.feedback
    assert len(result.feedback) <= 2000
    assert_clean(tmp_path)


def test_python_error_at_import_is_a_compile_stage_failure(task, config):
    result = evaluate(task, "import torch\nraise ValueError('boom at import')\n", config)
    assert result.stage == "compile" and "boom at import" in result.error


def test_the_judge_plans_its_cores_on_its_first_line(task, config, monkeypatch):
    """kevin.evaluator.cores: every judge plans the host's timing cores at its start, for the GPUs
    the variable names (3 here; a machine of fewer than 12 cores keeps no pair for them)."""
    from kevin.evaluator import cores

    monkeypatch.setenv(cores.VARIABLE, "3")
    result = evaluate(task, "import torch\nclass Something: pass\n", config)
    assert result.checks["cores"] == cores.plan(os.sched_getaffinity(0), 3).summary()


def test_missing_model_new(task, config):
    result = evaluate(task, "import torch\nclass Something: pass\n", config)
    assert result.stage == "compile" and "ModelNew" in result.error


def test_output_spam_is_truncated_and_does_not_break_the_verdict(task, config):
    result = evaluate(task, candidate("spam"), config)
    assert result.stage == "ok", result.error
    assert "truncated by kevin" in result.log
    assert len(result.log) <= config.limits.log_chars + 200
    assert "spam" not in result.feedback


def test_sys_exit_in_forward_is_a_runtime_failure(task, config):
    result = evaluate(task, candidate("scale_relu", body="        import sys\n        sys.exit(3)\n"), config)
    assert result.stage == "runtime" and "SystemExit" in result.error


def test_os_exit_in_forward_is_a_runtime_failure(task, config):
    result = evaluate(task, candidate("scale_relu", body="        import os\n        os._exit(7)\n"), config)
    assert result.stage == "runtime" and "code 7" in result.error and result.blame == "candidate"


def test_host_memory_blowup_is_killed(task, config):
    body = "        hog = b'x' * (4 * 2**30)\n"
    # A loaded 2-core machine can take many seconds to fault in gigabytes: a generous deadline, so
    # the memory watch (not the clock) is what ends this worker.
    limits = dataclasses.replace(
        config.limits, stage_timeouts_s={**config.limits.stage_timeouts_s, "correctness": 300}
    )
    result = evaluate(task, candidate("scale_relu", body=body), dataclasses.replace(config, limits=limits))
    assert result.stage in ("runtime", "correctness") and not result.correct
    assert "memory" in result.error.lower()


def test_mutated_inputs_are_flagged_and_not_rewarded(task, config):
    result = evaluate(task, candidate("in_place"), config)
    assert "inputs_mutated" in result.flags
    assert not result.passed


def test_child_processes_are_killed(task, config):
    # Pids inside the runner's PID namespace mean nothing outside it: the child is found by a
    # marker in its command line.
    prelude = "import subprocess\n_child = subprocess.Popen(['sleep', '304'], start_new_session=True)\n"
    result = evaluate(task, candidate("scale_relu", prelude=prelude), config)
    assert "left_processes" in result.flags and not result.passed
    assert _marked("sleep\x00304") == [], "a process started by the candidate outlived the evaluation"


def test_a_child_whose_main_thread_ended_alone_is_still_a_process_left(task, config):
    # SYS_exit (x86-64: 60) ends the child's main thread only: /proc says zombie, its other thread
    # runs on. The runner's count read the zombie and missed it (the namespace still killed it).
    if os.uname().machine != "x86_64":
        pytest.skip("the test's syscall number is x86-64's")
    holder = "import ctypes,threading,time;threading.Thread(target=lambda:time.sleep(306)).start();ctypes.CDLL(None).syscall(60,0)"
    prelude = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {holder!r}])\ntime.sleep(1)\n"
    result = evaluate(task, candidate("scale_relu", prelude=prelude), config)
    assert "left_processes" in result.flags and not result.passed, result.explain()
    assert "left 1 process" in result.error
    assert _marked("time.sleep(306)") == [], "the process outlived the evaluation"


def test_broken_reference_is_blamed_on_infrastructure(config):
    source = (
        (DATA / "problem_scale_relu.py")
        .read_text()
        .replace("return [torch.randn(64, 256)]", "raise RuntimeError('broken problem')")
    )
    broken = Task.from_source(source, id="broken", name="broken")
    result = evaluate(broken, candidate("scale_relu"), config)
    assert result.blame == "infrastructure" and "broken problem" in result.error
    assert not result.passed


def _marked(marker: str) -> list[int]:
    """Processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found




def test_signal_name_helper():
    from kevin.evaluator.sandbox import WorkerOutcome

    assert WorkerOutcome(result=None, last_stage="x", returncode=-signal.SIGSEGV).signal_name == "SIGSEGV"


def test_patching_torch_in_the_candidates_process_does_not_reach_the_judges_inputs(task, config):
    # Under a naive harness this makes every input zero, where a do-nothing kernel is "correct".
    # The judge draws its own inputs in its own process: the do-nothing kernel is simply wrong.
    prelude = "_real_randn = torch.randn\ntorch.randn = lambda *a, **k: torch.zeros(*a, **k)\n"
    result = evaluate(task, candidate("zeros", prelude=prelude), config)
    assert result.stage == "correctness" and not result.passed


def test_thread_started_at_import_is_rejected(task, config):
    prelude = "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    result = evaluate(task, candidate("scale_relu", prelude=prelude), config)
    assert "extra_threads" in result.flags and not result.passed, result.checks.get("runner_threads")


# -- dynamic checks (kevin.evaluator.probes, kevin.evaluator.compare) ----------------------------------------------


@pytest.fixture(scope="module")
def big_task() -> Task:
    """Milliseconds of work per call, so the profiler's own overhead does not decide the shares."""
    source = (
        (DATA / "problem_scale_relu.py")
        .read_text()
        .replace("torch.randn(64, 256)", "torch.randn(1024, 1024)")
    )
    return Task.from_source(source, id="scale_relu_big", name="scale_relu_big")


def test_pure_torch_forward_is_library_work(big_task, config):
    body = "        return torch.relu(x * self.scale)\n"
    result = evaluate(big_task, candidate("scale_relu", body=body), config)
    assert result.correct and not result.passed
    assert {"library_kernels", "no_custom_kernel"} <= set(result.flags)
    assert "aten::relu" in result.checks["trace"]["library_ops_us"]


def test_aten_called_from_inside_the_extension_is_library_work(big_task, config):
    result = evaluate(big_task, candidate("lib_relu"), config)
    assert result.correct and "library_kernels" in result.flags and not result.passed


def test_honest_candidate_has_no_library_work(big_task, config):
    result = evaluate(big_task, candidate("scale_relu"), config)
    assert result.checks["trace"]["library_share"] < 0.5 and result.checks["trace"]["custom_us"] > 0


def test_zeros_cannot_pass_a_tiny_magnitude_problem(config):
    source = (
        (DATA / "problem_scale_relu.py")
        .read_text()
        .replace("return torch.relu(x * self.scale)", "return torch.relu(x * self.scale) * 1e-6")
    )
    tiny = Task.from_source(source, id="tiny", name="tiny")
    result = evaluate(tiny, candidate("zeros"), config)
    assert result.stage == "correctness" and "relative L2 error" in result.error


def test_shortcut_that_holds_only_for_the_problem_distribution_fails(config):
    # With inputs from rand (all >= 0), relu is a no-op: dropping it is right on the problem's own
    # inputs and wrong on the shifted-distribution trials.
    source = (
        (DATA / "problem_scale_relu.py").read_text().replace("torch.randn(64, 256)", "torch.rand(64, 256)")
    )
    positive = Task.from_source(source, id="positive", name="positive")
    result = evaluate(positive, candidate("scale_only"), config)
    assert result.stage == "correctness"
    # Every trial on the problem's own distribution passed; the first shifted one failed.
    assert result.correctness["trials"] == config.trials + 1
    assert result.correctness["trials_passed"] == config.trials


def test_lower_precision_is_flagged_under_loose_tolerances(task, config):
    loose = dataclasses.replace(config, atol=1e-2, rtol=1e-2)
    result = evaluate(task, candidate("low_precision"), loose)
    assert result.correct and "lower_precision" in result.flags and not result.passed
    assert result.checks["precision"]["candidate_vs_fp64"] > 1e-5
    honest = evaluate(task, candidate("scale_relu"), loose)
    assert "lower_precision" not in honest.flags


DEFERRED_CPP = r"""
#include <torch/extension.h>
#include <chrono>
#include <thread>

torch::Tensor deferred(torch::Tensor x, double scale) {     // returns at once, writes the answer later
    auto input = x.contiguous();
    auto out = torch::zeros_like(input);
    std::thread([input, out, scale]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        out.copy_(torch::relu(input * scale));
    }).detach();
    return out;
}
"""


def test_a_kernel_that_writes_its_output_from_a_thread_after_returning_is_refused_at_build(task, config):
    # The output_flags probe (deferred_write) caught this at run time; the build broker's symbol
    # check now refuses a library that can start native threads at all, before it is loaded.
    source = candidate("deferred").replace(
        f"load_inline(name=\"kevin_test_ext\", cpp_sources={CPP!r}, functions={FUNCTIONS!r})",
        f"load_inline(name=\"kevin_test_deferred\", cpp_sources={DEFERRED_CPP!r}, functions=['deferred'])",
    )
    result = evaluate(task, source, config)
    assert result.stage == "compile" and not result.passed
    assert "native threads" in result.error and "thread" in result.error


def test_tensor_subclass_output_is_flagged(task, config):
    prelude = "class Lazy(torch.Tensor):\n    pass\n"
    body = "        return ext.scale_relu(x, self.scale).as_subclass(Lazy)\n"
    result = evaluate(task, candidate("scale_relu", prelude=prelude, body=body), config)
    assert "tensor_subclass" in result.flags and not result.passed


# -- what the candidate's process could reach (kevin.evaluator.confine, the tamper re-check) ---------------


def test_a_verdict_forged_on_the_channel_is_tampering(task, config):
    # Stronger than the corpus's forger: it finds the pipe without sys.argv, through /proc.
    prelude = (
        "import json, os\n"
        "_forged = {'event': 'result', 'result': {'stage': 'ok', 'correct': True,\n"
        "           'timing': {'median_ms': 0.001}, 'baseline': {'eager': {'median_ms': 1.0}}}}\n"
        "for _fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        if int(_fd) > 2 and os.readlink(f'/proc/self/fd/{_fd}').startswith('pipe:'):\n"
        "            os.write(int(_fd), (json.dumps(_forged) + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    result = evaluate(task, candidate("zeros", prelude=prelude), config)
    assert result.stage in ("compile", "runtime") and not result.passed
    assert result.speedup is None


def test_lines_written_to_the_judges_socket_are_tampering(task, config):
    # The candidate's process holds one socket, to the judge: whatever it writes there is a
    # broken protocol, never a verdict.
    prelude = (
        "import json, os\n"
        "_forged = {'ok': True, 'event': 'result', 'result': {'stage': 'ok', 'correct': True}}\n"
        "for _fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        if int(_fd) > 2 and os.readlink(f'/proc/self/fd/{_fd}').startswith('socket:'):\n"
        "            os.write(int(_fd), (json.dumps(_forged) + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = evaluate(task, candidate("zeros", prelude=prelude), config)
    assert "tampering" in result.flags and not result.passed and result.speedup is None


def test_a_torch_mode_that_lies_about_comparisons_stays_in_the_candidates_process(task, config):
    # A mode left entered intercepts every torch call of its process: comparisons included. The
    # comparison happens in the judge, which never ran the candidate's code.
    prelude = (
        "from torch.overrides import TorchFunctionMode\n"
        "class _Liar(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        if getattr(func, '__name__', '') in ('allclose', 'equal', 'isclose'):\n"
        "            return True\n"
        "        return func(*args, **(kwargs or {}))\n"
        "_Liar().__enter__()\n"
    )
    result = evaluate(task, candidate("zeros", prelude=prelude), config)
    assert result.stage == "correctness" and not result.passed


def test_rebinding_kevins_comparison_in_the_candidates_process_changes_nothing(task, config):
    body = (
        "        import sys, kevin.evaluator.compare\n"
        "        sys.modules['kevin.evaluator.compare'].compare = lambda *a: {'ok': True}\n"
    )
    result = evaluate(task, candidate("zeros", body=body), config)
    assert result.stage == "correctness" and not result.passed


def test_a_clock_patched_in_the_candidates_process_does_not_time_it(task, config):
    # The judge's clock times every call, from another process.
    prelude = "import time\ntime.perf_counter_ns = lambda: 0\ntime.perf_counter = lambda: 0.0\n"
    result = evaluate(task, candidate("scale_relu", prelude=prelude), config)
    assert result.passed and result.runtime_ms > 0 and result.timing["clock"] == "judge_cycle"


def test_a_changed_thread_count_is_global_state_and_its_baseline_is_not_cached(task, config):
    from kevin.evaluator.evaluate import _baseline_cache_file

    cached = _baseline_cache_file(task, config)
    cached.unlink(missing_ok=True)
    prelude = "torch.set_num_threads(torch.get_num_threads() + 3)\n"
    result = evaluate(task, candidate("scale_relu", prelude=prelude), config)
    assert result.correct and "global_state_changed" in result.flags and not result.passed
    assert result.checks["cpu_threads"] >= 1
    assert not cached.exists(), "a baseline timed next to a flagged candidate was cached"
    honest = evaluate(task, candidate("scale_relu"), config)
    assert honest.passed and cached.exists()


def test_the_judge_keeps_a_core_so_a_multithreaded_baseline_is_timed_at_its_speed(config):
    """Regression (CI, session 7): torch's default threads took every core, so between timed calls
    the judge and the runner's main thread waited for time slices while the runner's OpenMP
    threads spun: a 1 MB relu(x * 2) (0.05 ms in a loop) timed at ~4 ms on 2 cores against ~0.4 ms
    on one thread, and an honest single-threaded C++ loop read 11-62x faster than the reference.
    Both sides now run at torch's default less one core: never slower than on one thread."""
    import torch

    from kevin.evaluator.worker.support import cpu_threads

    source = (DATA / "problem_scale_relu.py").read_text().replace("randn(64, 256)", "rand(256, 1024)")
    big = Task.from_source(source, id="scale_relu_1mb", name="scale_relu_1mb")
    config = dataclasses.replace(config, baseline_cache=False)
    default = evaluate(big, candidate("scale_relu"), config)
    one = evaluate(big, candidate("scale_relu"), dataclasses.replace(config, cpu_threads=1))
    assert default.passed and one.passed, default.error + one.error
    assert default.checks["cpu_threads"] == cpu_threads(None, torch.get_num_threads())
    assert one.checks["cpu_threads"] == 1
    assert default.baseline_ms < 3.0 * one.baseline_ms, (default.baseline_timing, one.baseline_timing)


def test_a_baseline_whose_timing_stays_dispersed_is_neither_scored_against_nor_cached(config):
    """Issue #14 finding 3: baselines timed while the host was busy (median 19.7 ms, fastest call
    0.025 ms) were cached and inflated every later speedup of their task. A reference that sleeps on
    7 calls of 8 stands in for a disturbed host: its timing is dispersed on every attempt."""
    from kevin.evaluator.evaluate import _baseline_cache_file

    source = (DATA / "problem_scale_relu.py").read_text()
    source = source.replace("import torch\n", "import time\n\nimport torch\n", 1)
    source = source.replace(
        "        return torch.relu(x * self.scale)",
        "        self.calls = getattr(self, 'calls', 0) + 1\n"
        "        if self.calls % 8:\n"
        "            time.sleep(0.004)\n"
        "        return torch.relu(x * self.scale)",
    )
    disturbed = Task.from_source(source, id="scale_relu_disturbed", name="scale_relu_disturbed")
    cached = _baseline_cache_file(disturbed, config)
    result = evaluate(disturbed, candidate("scale_relu"), config)
    assert result.stage == "runtime" and result.blame == "infrastructure", (result.stage, result.error)
    assert "dispersed" in result.error and result.speedup is None and not result.passed
    assert not cached.exists()


def test_the_dispersion_rule_separates_a_disturbed_timing_from_honest_noise():
    from kevin.evaluator.timing import dispersed, summarize

    def stats(median: float, fastest: float, overhead: float = 0.07):
        cycles = [fastest + overhead] + [median + overhead] * 20
        return summarize([c - overhead for c in cycles], cycles, "judge_cycle")

    assert dispersed(stats(19.7, 0.025)) and dispersed(stats(4.2, 0.29))  # seen: a busy host
    assert not dispersed(stats(0.29, 0.118))  # a 2-core VM's honest spread
    assert not dispersed(stats(1.02, 0.98, overhead=0.2))  # the H200's
    assert not dispersed(stats(0.007, 0.001, overhead=0.2))  # a 7 us kernel's jitter
    # Seen in a concurrent CPU test: a 0.085 ms call whose fastest cycle, less the median overhead,
    # was 0.001 ms. The cycles themselves were steady: not dispersed.
    assert not dispersed(stats(0.0846, 0.0011))


def test_cpu_threads_leave_the_judge_a_core_unless_asked():
    from kevin.evaluator.worker.support import cpu_threads

    assert cpu_threads(None, torch_default=2, cores=2) == 1
    assert cpu_threads(None, torch_default=8, cores=16) == 8  # torch's default (physical cores) fits
    assert cpu_threads(None, torch_default=16, cores=16) == 15
    assert cpu_threads(None, torch_default=1, cores=1) == 1
    assert cpu_threads(3, torch_default=2, cores=2) == 3  # an explicit count is the user's call


def test_writes_outside_the_job_directory_are_denied(task, config):
    target = Path(config.cache_dir) / "baselines" / "planted.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    prelude = f"open({str(target)!r}, 'w').write('{{}}')\n"
    result = evaluate(task, candidate("scale_relu", prelude=prelude), config)
    if not result.checks.get("confinement", {}).get("landlock_abi") and result.stage != "compile":
        pytest.skip("this kernel has no Landlock")
    assert result.stage == "compile" and "PermissionError" in result.error
    assert not target.exists()


def test_a_fork_of_the_runner_that_falls_back_into_its_loop_never_speaks_for_it(task, config):
    # The candidate's fork raises at import and so returns through the runner's own stack into its
    # loop, holding a copy of the runner's socket. It used to answer the judge's `load` (a compile
    # error) before the real runner did, then wait on the socket beside it: which reply the judge
    # read first decided the verdict (s36's CI: abuse_escaped_daemon read `compile` on one run and
    # `tampering` on another). A runner's link now speaks and listens only in the runner itself.
    prelude = (
        "import os\n"
        "_child = os.fork()\n"
        "if _child == 0:\n"
        "    raise RuntimeError('a fork of the runner, on its way back into the runner loop')\n"
        "os.waitpid(_child, 0)\n"
    )
    result = evaluate(task, candidate("scale_relu", prelude=prelude), config)
    assert result.passed and result.flags == [], result.explain()


def test_a_double_forked_daemon_with_no_environment_is_found_and_fails_the_candidate(task, config):
    # Leaves the session and the sandbox token behind: the runner's PID namespace still holds it.
    prelude = (
        "import os\n"
        "_child = os.fork()\n"
        "if _child == 0:\n"
        "    os.setsid()\n"
        "    if os.fork():\n"
        "        os._exit(0)\n"
        "    os.execve('/bin/sleep', ['sleep', '305'], {})\n"
        "os.waitpid(_child, 0)\n"
    )
    result = evaluate(task, candidate("scale_relu", prelude=prelude), config)
    assert "left_processes" in result.flags and not result.passed
    assert "left 1 process" in result.error
    assert _marked("sleep\x00305") == [], "the daemon outlived the evaluation"


def test_a_baseline_cached_while_an_evaluation_ran_is_used_not_timed_again(task, config, monkeypatch):
    from kevin.evaluator import evaluate as evaluate_module

    first = evaluate(task, candidate("scale_relu"), config)
    assert (
        first.passed
        and "baseline" in first.stage_seconds
        or evaluate_module._baseline_cache_file(task, config).exists()
    )
    # As if the parent had read the cache just before another evaluation of the task wrote it.
    monkeypatch.setattr(evaluate_module, "_read_baseline", lambda path: {})
    second = evaluate(task, candidate("scale_relu"), config)
    assert second.passed and "baseline" not in second.stage_seconds
    assert second.baseline_ms is not None and second.speedup is not None


def test_a_cached_baseline_timed_under_other_conditions_is_timed_again(task, config):
    """Issue #14 finding 3: a baseline cached from a busy moment served every later evaluation of
    its task. One whose clean overhead disagrees with this evaluation's is timed again, here."""
    import json

    from kevin.evaluator.evaluate import _baseline_cache_file, _write_baseline

    cached = _baseline_cache_file(task, config)
    busy = {"median_ms": 50.0, "min_ms": 49.0, "wall_median_ms": 60.0, "wall_min_ms": 59.0,
            "overhead_ms": 10.0, "clock": "judge_cycle"}  # fmt: skip
    _write_baseline(cached, {"eager": busy}, "cpu")
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.passed and "baseline" in result.stage_seconds, result.error
    assert result.checks["baseline_recheck"][0]["cached_overhead_ms"] == 10.0
    assert result.baseline_ms < 10.0 and result.speedup < 20, (result.baseline_ms, result.speedup)
    rewritten = json.loads(cached.read_text())["stats"]["eager"]
    assert rewritten["overhead_ms"] < 1.0 and rewritten["median_ms"] == result.baseline_ms


def test_a_cached_baseline_claiming_a_big_speedup_is_timed_again_before_it_is_scored(task, config):
    """Session 22 (H200): a reference timed at 38x its real time while the trainer shared the device
    was cached with a clean overhead (so `overheads_match` kept it) and scored six candidates at
    50-80x. A cached baseline that claims RECHECK_SPEEDUP or more is timed again here."""
    import json

    from kevin.evaluator.evaluate import _baseline_cache_file, _write_baseline

    cached = _baseline_cache_file(task, config)
    slow = {"median_ms": 500.0, "min_ms": 490.0, "wall_median_ms": 500.1, "wall_min_ms": 490.1,
            "clock": "judge_cycle"}  # fmt: skip  (no overhead_ms: nothing for overheads_match to refuse)
    _write_baseline(cached, {"eager": slow}, "cpu")
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.passed and "baseline" in result.stage_seconds, result.error
    (recheck,) = result.checks["baseline_recheck"]
    assert recheck["cached_ms"] == 500.0 and recheck["claimed_speedup"] >= 3
    assert result.baseline_ms < 50.0 and result.speedup < 20, (result.baseline_ms, result.speedup)
    rewritten = json.loads(cached.read_text())["stats"]["eager"]
    assert rewritten["median_ms"] == result.baseline_ms and "claim_checked" not in rewritten


def test_overheads_match_within_a_factor_or_a_floor():
    from kevin.evaluator.worker.baseline import overheads_match

    assert overheads_match(0.2, 0.25) and not overheads_match(0.2, 0.9)  # the GPU's spinning
    assert overheads_match(0.029, 0.114, "block")  # the CPU back end's socket, quiet
    assert not overheads_match(10.0, 0.07, "block")  # a busy moment
    assert overheads_match(None, 0.2)  # nothing cached to compare with


def test_concurrent_evaluations_of_one_task_time_its_baseline_once(task, config):
    from concurrent.futures import ThreadPoolExecutor

    from kevin.evaluator import evaluate as evaluate_module

    evaluate_module._baseline_cache_file(task, config).unlink(missing_ok=True)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: evaluate(task, candidate("scale_relu"), config), range(3)))
    assert all(r.passed for r in results), [r.error for r in results]
    timed_here = [r for r in results if "baseline" in r.stage_seconds]
    assert len(timed_here) == 1, [r.stage_seconds for r in results]
    assert len({r.baseline_ms for r in results}) == 1
    assert all(r.checks["device_admission"]["slots"] == config.device_slots for r in results)


def _patient(config: EvalConfig) -> EvalConfig:
    """Stage limits far beyond the per-call deadline: a timeout now can only be the judge's own."""
    limits = dataclasses.replace(
        config.limits, stage_timeouts_s={**config.limits.stage_timeouts_s, "correctness": 300, "timing": 300}
    )
    return dataclasses.replace(config, limits=limits)


def test_a_hang_in_the_first_call_costs_seconds_not_the_stage_limit(task, config):
    # issue #15: a hang held the GPU until the stage's wall-clock limit (120 s); the judge now kills
    # the runner once a call passes max(10 s for the first call, 50x the reference's call).
    result = evaluate(task, candidate("spin"), _patient(config))
    assert result.stage == "timeout" and result.blame == "candidate", result.error
    assert "ran past 10.0 s" in result.error and "during correctness" in result.error
    assert result.stage_seconds["correctness"] < 15, result.stage_seconds


def test_a_hang_while_timed_costs_seconds_not_the_stage_limit(task, config):
    later = candidate(
        "scale_relu",
        prelude="_calls = [0]\n",
        # Past the trials (7 calls) and the trace (at most probes.TRACE_CALL_BUDGET-ish calls plus
        # the ones short calls add, < 90 in all): in the timed cycles, hundreds of calls.
        body="        _calls[0] += 1\n        while _calls[0] > 200:\n            pass\n",
    )
    # The whole budget, not the adaptive count: a steady warm-up plans as few as 32 timed calls, and
    # on a quiet machine the candidate then ended before its 200th call (CI, session 21).
    config = dataclasses.replace(config, timing=dataclasses.replace(config.timing, precision=0.0))
    result = evaluate(task, later, _patient(config))
    assert result.stage == "timeout" and result.blame == "candidate", result.error
    assert "ran past 2.0 s" in result.error and "during timing" in result.error
    assert result.stage_seconds["timing"] < 6, result.stage_seconds
