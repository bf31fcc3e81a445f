"""Device work of kevin's own processes runs inside the device's lock, never inside a timing.

A timing holds the device's lock exclusively (kevin.evaluator.devlock) because anything else on
the GPU meanwhile is timed with the candidate. Until session 24 several pieces of device work ran
outside the lock, each of them, in a 16-job batch, beside some other worker's timing: a spare's
boot (three CUDA contexts, two 256 MB flush buffers the driver clears, CUPTI's start), the judge's
reference weights, and the candidate's `load` (its import and its model's construction: code the
candidate chose, which may put its own work on the device). Each now holds the lock shared; the
builds a `load` asks for are served with the lock let go. These tests watch the lock from outside
(can another process's exclusive section start now?) at each of those moments.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import pytest

from kevin.evaluator import devlock
from kevin.evaluator.worker.handle import CallTimedOut, CycleRecord, RunnerFailed
from kevin.evaluator.worker.harness import LOAD_WAIT_S, Harness
from kevin.evaluator.worker.support import Failure


def timing_could_start(path: Path) -> bool:
    """Whether an exclusive section (a timing) could take the lock at this moment."""
    return not devlock.held(path)


class Channel:
    def send(self, message: dict[str, Any]) -> None:
        pass


@pytest.fixture(autouse=True)
def torch_left_as_found():
    """The runner's boot sets torch's process-wide state (no grad, one thread, no TF32) and the judge
    seeds its RNG: here they run in the test process, which later tests share."""
    import torch

    grad, threads = torch.is_grad_enabled(), torch.get_num_threads()
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with torch.random.fork_rng(devices=[]):
        yield
    torch.set_grad_enabled(grad)
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


@pytest.fixture
def lock_path(tmp_path):
    return devlock.ensure_files(tmp_path / "kevin-cuda0.lock", 2)


def harness(lock_path: Path, broker: Any = None, monkeypatch: Any = None) -> Harness:
    job = {
        "device": "cpu", "precision": "fp32", "seed": 1, "weight_seed": 1, "device_lock": str(lock_path),
        "device_slots": 2, "candidate_source": "", "candidate_filename": "candidate.py",
        "problem_source": "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.ones(4)]\ndef get_init_inputs():\n    return []\n",
    }  # fmt: skip
    judge = Harness(job, Channel(), broker)
    if monkeypatch is not None:  # the GPU back end's paths, with the CUDA calls stood in for
        import torch

        judge.is_cuda = True
        monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    return judge


class LoadingRunner:
    """Answers `load` after asking for two builds, noting whether a timing could start at each step."""

    def __init__(self, lock_path: Path, fail: bool = False) -> None:
        self.lock_path, self.fail, self.seen = lock_path, fail, []

    def request(
        self, command: str, builds: Any = None, deadline_s: float | None = None, **fields: Any
    ) -> dict[str, Any]:
        assert command == "load"
        assert deadline_s == LOAD_WAIT_S  # a hang at import holds the device this long at most
        self.seen.append(("import", timing_could_start(self.lock_path)))
        for name in ("ext_a", "ext_b"):
            builds({"name": name})
            self.seen.append(("after " + name, timing_could_start(self.lock_path)))
        if self.fail:
            raise RunnerFailed({"stage": "compile", "error": "boom at import"})
        return {"ok": True, "builds": []}


def test_the_candidates_load_holds_the_device_and_its_builds_do_not(lock_path, monkeypatch):
    seen_in_builds: list[tuple[str, bool]] = []

    class Broker:
        def build(self, arguments: dict[str, Any]) -> Any:
            seen_in_builds.append((arguments["name"], timing_could_start(lock_path)))
            return types.SimpleNamespace(to_dict=lambda: {"ok": True})

    judge = harness(lock_path, Broker(), monkeypatch)
    runner = LoadingRunner(lock_path)
    judge.load_candidate(runner)  # type: ignore[arg-type]
    assert runner.seen == [("import", False), ("after ext_a", False), ("after ext_b", False)]
    assert seen_in_builds == [("ext_a", True), ("ext_b", True)]
    assert timing_could_start(lock_path)
    assert judge.stage_name == "compile" and judge.compiled

    failing = LoadingRunner(lock_path, fail=True)
    with pytest.raises(Failure):
        judge.load_candidate(failing)  # type: ignore[arg-type]
    assert timing_could_start(lock_path)  # let go on the failure too


def test_an_import_that_hangs_holds_the_device_no_longer_than_the_load_wait(lock_path, monkeypatch):
    """A candidate whose import never ends: its runner is killed at LOAD_WAIT_S (a `timeout`), not at
    the compile stage's 600 s, and the device is let go."""

    class Hanging:
        def request(self, command: str, **fields: Any) -> dict[str, Any]:
            assert not timing_could_start(lock_path)
            raise CallTimedOut(fields["deadline_s"])

    judge = harness(lock_path, monkeypatch=monkeypatch)
    with pytest.raises(Failure) as caught:
        judge.load_candidate(Hanging())  # type: ignore[arg-type]
    assert (
        caught.value.fields["stage"] == "timeout"
        and "import or model construction" in caught.value.fields["error"]
    )
    assert f"{LOAD_WAIT_S:g} s" in caught.value.fields["error"] and timing_could_start(lock_path)
    assert LOAD_WAIT_S <= 60


class BootingRunner:
    def __init__(self, lock_path: Path, booted: bool = False) -> None:
        self.lock_path = lock_path
        self.boot_reply = {"ok": True, "seconds": {"import": 1.0}} if booted else None
        self.context_reply = {"ok": True, "seconds": {"cuda": 0.5}} if booted else None
        self.warm_sent, self.warm_reply = booted, None  # a spare sent `warm` after its `context`
        self.confinement: dict[str, Any] = {}
        self.started = 0.0
        self.seen: list[tuple[str, bool]] = []
        self.sent: list[tuple[str, bool]] = []

    def reply(self, command: str) -> dict[str, Any]:
        self.seen.append((command, timing_could_start(self.lock_path)))
        seconds = {"boot": {"import": 1.0, "boot": 2.0}, "context": {"cuda": 0.5}, "warm": {"profiler": 0.2}}
        return {"ok": True, "seconds": seconds[command]}

    def request(self, command: str, **_: Any) -> dict[str, Any]:
        if command in ("context", "warm"):
            return self.reply(command)
        self.seen.append((command, timing_could_start(self.lock_path)))
        return {"ok": True}

    def send(self, command: str, **_: Any) -> None:
        self.sent.append((command, timing_could_start(self.lock_path)))

    def kill(self) -> int:
        return 0


def test_a_runner_made_ready_by_the_judge_gets_its_device_inside_the_lock(lock_path, monkeypatch):
    judge = harness(lock_path, monkeypatch=monkeypatch)
    runner = BootingRunner(lock_path)
    judge.runner_ready(runner)  # type: ignore[arg-type]
    # The profiler's start (CUPTI) after the context, the lock let go: timings need not wait for it.
    assert runner.seen == [("boot", True), ("context", False), ("warm", True), ("setup", True)]
    assert judge.checks["runner_start_s"][0].keys() >= {"import", "boot", "cuda", "profiler"}
    # A spare's runner did its boot and context before its job and was sent `warm`: only that
    # reply is collected, still outside the lock.
    spare = BootingRunner(lock_path, booted=True)
    judge.runner_ready(spare)  # type: ignore[arg-type]
    assert spare.seen == [("warm", True), ("setup", True)]
    assert judge.checks["runner_start_s"][1].keys() >= {"cuda", "profiler"}


def test_the_judges_reference_weights_go_to_the_device_inside_the_lock(lock_path, monkeypatch):
    from kevin.evaluator.worker import harness as harness_module

    seen: list[bool] = []
    real = harness_module.cast_floating
    monkeypatch.setattr(
        harness_module, "cast_floating", lambda m, d: seen.append(timing_could_start(lock_path)) or real(m, d)
    )
    judge = harness(lock_path, monkeypatch=monkeypatch)
    judge.load_reference()
    assert seen == [False] and timing_could_start(lock_path)


def test_a_spare_does_its_boots_device_work_in_one_shared_section(lock_path, monkeypatch):
    """kevin.evaluator.worker.__main__.on_device with the CUDA calls and the runners stood in for:
    the runners' boots are collected first (no lock), then this process's context and both runners'
    `context` inside one shared section, which is let go (and its files closed) after."""
    import torch

    from kevin.evaluator.worker import __main__ as worker

    seen: list[tuple[str, bool]] = []
    monkeypatch.setattr(
        torch.cuda, "set_device", lambda device: seen.append(("set_device", timing_could_start(lock_path)))
    )
    monkeypatch.setattr(
        torch.cuda, "synchronize", lambda: seen.append(("synchronize", timing_could_start(lock_path)))
    )
    real_zeros = torch.zeros
    monkeypatch.setattr(
        torch,
        "zeros",
        lambda *a, device=None, **k: (
            seen.append(("zeros", timing_could_start(lock_path))) or real_zeros(*a, **k)
        ),
    )
    runners = [BootingRunner(lock_path), BootingRunner(lock_path)]
    before = len(os.listdir("/proc/self/fd"))
    worker.on_device({"device": "cuda:0", "device_lock": str(lock_path), "device_slots": 2}, runners)  # type: ignore[arg-type]
    assert [r.seen for r in runners] == [[("boot", True), ("context", False)]] * 2
    # `context` sent inside the section, `warm` (CUPTI's start) once it is let go.
    assert [r.sent for r in runners] == [[("context", False), ("warm", True)]] * 2
    assert all(r.warm_sent for r in runners)
    assert seen == [("set_device", False), ("zeros", False), ("synchronize", False)]
    assert all(r.boot_reply and r.context_reply for r in runners)
    assert timing_could_start(lock_path) and len(os.listdir("/proc/self/fd")) == before


def test_a_runners_boot_touches_no_device_and_its_context_does(monkeypatch):
    """The runner's `boot` for a CUDA device does nothing on the device: on a machine without CUDA
    it still boots. `context` is where its device work went, in this order."""
    import torch

    from kevin.evaluator import probes
    from kevin.evaluator.worker.runner import Runner

    monkeypatch.setattr(torch.cuda, "set_device", lambda device: pytest.fail("boot touched the device"))
    runner = Runner(None, None)  # type: ignore[arg-type]
    job = {"device": "cuda:0", "cpu_threads": 1, "flush_l2": True, "traced": True}
    reply = runner.boot(job)
    assert reply["ok"] and "profiler" not in reply["seconds"] and runner.flush is None

    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(f"set_device {device}"))
    real_zeros, real_empty = torch.zeros, torch.empty
    monkeypatch.setattr(
        torch, "zeros", lambda *a, device=None, **k: calls.append(f"zeros {device}") or real_zeros(*a, **k)
    )
    monkeypatch.setattr(
        torch, "empty", lambda *a, device=None, **k: calls.append(f"empty {device}") or real_empty(4, **k)
    )
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(L2_cache_size=60 << 20)
    )
    monkeypatch.setattr(probes, "warm_profiler", lambda is_cuda: calls.append(f"profiler {is_cuda}") or 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("synchronize"))
    reply = runner.context({})
    assert reply["ok"] and set(reply["seconds"]) == {"cuda"}
    assert calls == ["set_device cuda:0", "zeros cuda:0", "empty cuda:0", "synchronize"]
    # The profiler's start is `warm`, sent once the lock is let go; a never-traced runner skips it.
    reply = runner.warm({})
    assert reply["ok"] and set(reply["seconds"]) == {"profiler"} and calls[-1] == "profiler True"
    runner.traced = False
    assert runner.warm({})["seconds"] == {} and calls.count("profiler True") == 1


def test_a_runner_synchronizes_through_the_function_it_bound_before_any_candidate(monkeypatch):
    """A candidate that replaces torch.cuda.synchronize (and the C function under it) after the
    runner booted does not stop the runner's synchronize: every timed call's DONE still waits for
    the device (DESIGN.md section 4: synchronize the whole device before stopping a clock)."""
    import torch

    from kevin.evaluator.worker.runner import Runner

    synced: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append("device"))
    if hasattr(torch._C, "_cuda_synchronize"):
        monkeypatch.setattr(torch._C, "_cuda_synchronize", lambda: synced.append("device"))
    runner = Runner(None, None)  # type: ignore[arg-type]
    runner.boot({"device": "cuda:0", "cpu_threads": 1, "flush_l2": True, "traced": False})
    # The candidate's import, in this process: both names now do nothing.
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    if hasattr(torch._C, "_cuda_synchronize"):
        monkeypatch.setattr(torch._C, "_cuda_synchronize", lambda: None)
    runner._sync()
    assert synced == ["device"]


def test_the_baselines_reference_weights_load_inside_the_lock(lock_path, monkeypatch):
    """The control runner loads the reference (its weights to the device) before timing it."""

    class Control(BootingRunner):
        def request(self, command: str, **_: Any) -> dict[str, Any]:
            self.seen.append((command, timing_could_start(self.lock_path)))
            return {"ok": True}

    judge = harness(lock_path, monkeypatch=monkeypatch)
    judge.lock = devlock.DeviceLock(lock_path, 2)  # admitted
    judge.control = control = Control(lock_path)  # type: ignore[assignment]
    judge.overhead = {"output_bytes": 16}

    def stop(*_: Any, **__: Any) -> Any:
        raise Failure("runtime", "stopped here")

    monkeypatch.setattr(judge, "time_steadily", stop)
    with pytest.raises(Failure):
        judge.time_reference(compiled=False)
    assert control.seen == [("load", False)]
    judge.lock.close()


def test_a_worker_whose_job_is_already_there_leaves_the_device_boot_to_the_job(monkeypatch):
    """A spare waits for its job anyway: it does its device boot in one shared section before. A
    worker started for a job already written to it (no spare was ready) returns at once, so its
    runners' start overlaps the job's setup; runner_ready then does their `context` under the lock."""
    from kevin.evaluator.worker import __main__ as worker

    sections: list[list[str]] = []
    monkeypatch.setattr(worker, "launch_runner", lambda spec, path, traced=True, fork=False: path.name)
    monkeypatch.setattr(worker.devlock, "warm_meta", lambda: None)
    monkeypatch.setattr(worker, "on_device", lambda spec, runners: sections.append(runners))
    cuda = {"device": "cuda:0"}
    assert worker.boot_up(cuda, job_waiting=lambda: True) == ("runner1", "runner2") and sections == []
    assert worker.boot_up(cuda, job_waiting=lambda: False) == ("runner1", "runner2")
    assert sections == [["runner1", "runner2"]]
    assert worker.boot_up({"device": "cpu"}) == ("runner1", "runner2") and len(sections) == 1


def test_on_the_cpu_back_end_a_load_takes_no_lock(lock_path):
    """The host is not a device: an import there is host work, like the builds no lock keeps from a
    timing; holding the host's lock would only move those builds later in the batch (s24's CI)."""

    class Broker:
        def build(self, arguments: dict[str, Any]) -> Any:
            return types.SimpleNamespace(to_dict=lambda: {"ok": True})

    judge = harness(lock_path, Broker())
    runner = LoadingRunner(lock_path)
    judge.load_candidate(runner)  # type: ignore[arg-type]
    assert runner.seen == [("import", True), ("after ext_a", True), ("after ext_b", True)]


def test_admission_shares_only_what_the_booted_workers_contexts_leave(lock_path, monkeypatch):
    """A job that fits its share of a free 80 GiB device goes alone once the plan reserves 40 GiB
    of it for the workers' CUDA contexts (kevin.evaluator.devmem)."""
    import torch

    gib = 1 << 30
    device = type("Properties", (), {"total_memory": 80 * gib})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: device)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (80 * gib, 80 * gib))
    weights = {}
    for reserved in (0, 40 * gib):
        judge = harness(lock_path, monkeypatch=monkeypatch)
        judge.job.update(trials=3, device_reserved_bytes=reserved)
        judge.admit(3 * gib // 2)  # 16 copies: 24 GiB a job, 48 for both slots
        weights[reserved] = judge.checks["device_admission"]["weight"]
        judge.lock.close()
    assert weights == {0: 1, 40 * gib: 2}


def test_a_verdict_keeps_the_memory_its_job_found_and_the_judges_peak(lock_path, monkeypatch):
    """The numbers the footprint estimate is to be fitted to: the device's free memory once the job
    is admitted, and the judge's own allocator peak (host-side reads); none on the CPU back end."""
    import torch

    gib = 1 << 30
    device = type("Properties", (), {"total_memory": 80 * gib})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: device)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (50 * gib, 80 * gib))
    assert harness(lock_path).device_memory() is None
    judge = harness(lock_path, monkeypatch=monkeypatch)
    judge.job.update(trials=3, device_reserved_bytes=20 * gib)
    judge.admit(gib)
    judge.lock.close()
    assert judge.checks["device_admission"]["free_bytes"] == 50 * gib
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 3 * gib)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device: 4 * gib)
    assert judge.device_memory() == {"judge_peak_allocated": 3 * gib, "judge_peak_reserved": 4 * gib}


class CalibratingRunner:
    """Answers the clean calibration's overhead cycles, noting the admission slots held meanwhile
    and whether it was asked to hand its draws' device memory back."""

    def __init__(self, lock_path: Path) -> None:
        self.lock_path, self.seen = lock_path, []
        self.process = types.SimpleNamespace(pid=os.getpid())

    def run_cycles(self, *, fetch: Any, trim: bool = False, **_: Any) -> CycleRecord:
        self.seen.append((devlock.slots_held(self.lock_path, 2), timing_could_start(self.lock_path), trim))
        record = CycleRecord(settled=True)
        for index in range(20):
            record.cycle_ns.append(100_000)
            if fetch(index, 20):
                record.fetch_ns[index] = record.copy_ns[index] = 20_000
        return record


def test_the_clean_calibration_is_admitted_for_its_moment_and_hands_its_memory_back(lock_path, monkeypatch):
    """s46 (H100, A/A pass, 16 in flight): every judge calibrated outside admission (the reference's
    outputs here, a draw of the inputs in the runner) and kept it in torch's cache through its
    compile; the device filled and 15 evaluations ended in out-of-memory. Now the calibration holds
    the slots its draw needs, both sides empty their caches, and the slots go before the compile."""
    import torch

    gib = 1 << 30
    device = type("Properties", (), {"total_memory": 80 * gib})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: device)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (70 * gib, 80 * gib))
    emptied = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(devlock.slots_held(lock_path, 2)))
    monkeypatch.setenv("KEVIN_TIMING_CORES", "off")
    judge = harness(lock_path, monkeypatch=monkeypatch)
    judge.job.update(timing={"budget_ms": 100.0}, trials=1)
    judge.load_reference()
    judge.input_bytes = gib  # a 1 GiB input: x 4 is within its share of what is left
    runner = CalibratingRunner(lock_path)
    overhead = judge.calibrate(runner, "candidate")  # type: ignore[arg-type]
    assert overhead["cycle_ms"] == pytest.approx(0.1)
    assert runner.seen == [(1, False, True)]  # one slot, the device shared, the runner trims
    assert emptied == [1]  # the judge's cache emptied while its slot is still held
    assert devlock.slots_held(lock_path, 2) == 0  # and the slot let go before the compile
    assert judge.checks["device_admission"]["calibrate_memory_wait_s"] == 0.0
    judge.input_bytes = 8 * gib  # too big to share what the contexts leave: the whole device
    judge.job["device_reserved_bytes"] = 40 * gib
    judge.calibrate(runner, "candidate")  # type: ignore[arg-type]
    assert runner.seen[-1] == (2, False, True) and devlock.slots_held(lock_path, 2) == 0


def test_a_warm_sent_at_boot_is_collected_later_in_order_by_a_real_runner(tmp_path):
    """The spare's protocol with a real (CPU) runner: `warm` sent after boot without waiting, its reply
    read later, then the next command answered as usual (the sequence numbers line up)."""
    from kevin.evaluator.worker.harness import launch_runner

    spec = {
        "max_file_bytes": 1 << 26, "build_cache": str(tmp_path / "builds"), "device": "cpu",
        "area_bytes": 1 << 24, "cpu_threads": 1, "flush_l2": False, "fast_build": True,
    }  # fmt: skip
    runner = launch_runner(spec, tmp_path / "home", traced=True)
    try:
        assert runner.reply("boot")["ok"]
        runner.send("warm")
        runner.warm_sent = True
        reply = runner.reply("warm")
        assert reply["ok"] and reply["seconds"] == {}  # the CPU back end warmed at boot
        assert runner.request("state")["ok"]
    finally:
        runner.kill()


def test_a_runner_asked_to_trim_hands_its_cycles_device_memory_back_even_when_they_fail():
    """The runner's side of the admitted calibration: torch's cache would keep the draws' blocks."""
    from kevin.evaluator.worker.runner import Runner

    emptied: list[str] = []
    runner = Runner.__new__(Runner)
    runner.is_cuda = True
    runner.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(empty_cache=lambda: emptied.append("x")))
    runner._cycles = lambda message: {"ok": True, "stopped": True}  # type: ignore[method-assign]
    assert runner.cycles({"trim": False}) == {"ok": True, "stopped": True} and emptied == []
    assert runner.cycles({"trim": True})["ok"] and emptied == ["x"]

    def failing(message: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("CUDA error")

    runner._cycles = failing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        runner.cycles({"trim": True})
    assert emptied == ["x", "x"]
