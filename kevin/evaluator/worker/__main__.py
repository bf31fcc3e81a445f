"""Entry point: `python -m kevin.evaluator.worker JOB_FD CHANNEL_FD` (started by kevin.evaluator.sandbox).

The job (secret seed, channel token, sources) arrives on JOB_FD, a pipe the supervisor writes and
closes: it is never in a file another process could read. This process is the judge: it never
imports the candidate (kevin.evaluator.worker.runner does, in a confined process of its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kevin.evaluator import confine, cores, devlock, spawn
from kevin.evaluator.confine import Channel
from kevin.evaluator.spares import BOOT_VARIABLE, boot_spec
from kevin.evaluator.worker.handle import RunnerHandle
from kevin.evaluator.worker.harness import Harness, launch_runner
from kevin.evaluator.worker.support import Failure, short_exception, timeline


def read_job(fd: int) -> dict[str, Any]:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks))


def start_broker(job: dict[str, Any]) -> Any:
    """The build broker for this job's runners (kevin.evaluator.broker), with what every build needs
    (kevin's shim, the symbol check's reference binding) built once per toolchain, here: runners
    only ever read the build cache."""
    from kevin.evaluator.broker import Broker

    broker = Broker(Path(job["build_cache"]), fast=job.get("fast_build", True))
    try:
        broker.prepare()
    except Exception as exc:  # noqa: BLE001 - each build then reports why it cannot be checked
        print(f"kevin: the build broker could not prepare: {exc}", file=sys.stderr)
    return broker


BOOT_NOTES: dict[str, Any] = {}
"""What the boot did that the verdict's checks report (`worker_boot`): `device_weight`, how putting a
spare's session back to full weight before its device work went."""


def boot_up(
    spec: Any, job_waiting: Callable[[], bool] = lambda: False
) -> tuple[RunnerHandle | None, RunnerHandle | None]:
    """Before the job (kevin.evaluator.spares): torch and the two runners (the candidate's, and the
    clean one that brackets its timing and times the baseline) started, then on the GPU back end
    the device work of all three (CUDA contexts, the runners' flush buffers) in one section
    that holds the device shared (`on_device`), so a boot never runs inside another worker's timing.
    A worker whose job is already there when its runners have started (`job_waiting`: not a spare)
    leaves that device work to the job, whose runner_ready does it under the lock the same way, so
    the runners' start still overlaps the job's own setup. The traced runner's profiler warm-up
    (CUPTI's start) follows, with the lock let go (`Runner.warm`). (None, None) without a boot
    spec, or when booting failed (the evaluation then starts its runners itself and reports what
    goes wrong)."""
    if not isinstance(spec, dict):
        return None, None
    runner = control = None
    try:
        # Forked from this process where they may be (kevin.evaluator.spawn.forkable): no job read yet.
        runner = launch_runner(spec, Path.cwd() / "runner1", fork=True)
        control = launch_runner(spec, Path.cwd() / "runner2", traced=False, fork=True)
    except Exception as exc:  # noqa: BLE001 - the evaluation retries the runner and reports
        return _boot_failed(exc, runner, control)
    # While the runners boot: the job's setup sizes its inputs on the meta device, whose first use
    # imports torch's reference ops: ~1 s of the setup stage on an idle CPU core, more on a loaded
    # machine (the stage's median was 5.4 s in s21's H200 learning run). Should it fail, the job's
    # setup pays it.
    with contextlib.suppress(Exception):
        devlock.warm_meta()
    if str(spec["device"]).startswith("cuda") and not job_waiting():
        # A spare imported torch at SPARE_NICENESS (work for later, beside the jobs of now); its
        # device work holds the lock shared, which timings wait for: done at full weight.
        if (cores.session_niceness(os.getpid()) or 0) > 0:
            BOOT_NOTES["device_weight"] = cores.nicer_session(os.getpid(), 0)
        try:
            on_device(spec, [runner, control])
        except Exception as exc:  # noqa: BLE001 - as above
            return _boot_failed(exc, runner, control)
    return runner, control


def on_device(spec: dict[str, Any], runners: list[RunnerHandle]) -> None:
    """The boot's device work, once the runners have started torch: this process's CUDA context and
    each runner's `context`, holding the device's lock shared (kevin.evaluator.devlock: a timing
    waits for it, and it waits for a timing); then each runner is sent `warm`, the lock let go."""
    import torch

    for runner in runners:
        runner.boot_reply = runner.reply("boot")
    path = spec.get("device_lock")
    lock = devlock.DeviceLock(path, int(spec.get("device_slots") or 1)) if path else None
    try:
        with lock.shared() if lock is not None else contextlib.nullcontext():
            torch.cuda.set_device(spec["device"])
            torch.zeros(1, device=spec["device"])
            for runner in runners:
                runner.send("context")
            for runner in runners:
                runner.context_reply = runner.reply("context")
            torch.cuda.synchronize()
    finally:
        if lock is not None:
            lock.close()
    for runner in runners:  # the profiler's start, outside the lock: collected by runner_ready
        runner.send("warm")
        runner.warm_sent = True


def _boot_failed(exc: BaseException, *runners: RunnerHandle | None) -> tuple[None, None]:
    print(f"kevin: the worker could not boot ahead of its job: {exc}", file=sys.stderr)
    for runner in runners:
        if runner is not None:
            runner.kill()
    return None, None


def main(argv: list[str]) -> int:
    started = time.time()
    cores.at_start()  # before any thread: this judge, its runners, broker and compilers inherit it
    confine.die_with_parent()
    confine.become_subreaper()
    spec = json.loads(os.environ.pop(BOOT_VARIABLE, "null") or "null")
    job_fd = int(argv[1])
    runner, control = boot_up(spec, job_waiting=lambda: bool(select.select([job_fd], [], [], 0)[0]))
    waiting = time.perf_counter()
    job = read_job(job_fd)
    job_at = time.time()
    spawn.seal_forks("the judge has read its job (its secrets are in its memory)")
    job_wait_s = time.perf_counter() - waiting
    channel = Channel(int(argv[2]), job.pop("channel_token"))
    confine.hide_channel_argument(argv)
    if runner is not None and spec != boot_spec(job):
        # Booted for another job's spec: never given one (spares are keyed by it).
        for booted in (runner, control):
            if booted is not None:
                booted.kill()
        runner = control = None
    # Building the shim (once per toolchain, ~30-60 s) is build work: under the compile deadline.
    channel.send({"event": "stage", "stage": "compile"})
    broker_at = time.time()
    Path(job["build_cache"]).mkdir(parents=True, exist_ok=True)
    broker = start_broker(job)
    channel.send({"event": "stage", "stage": "setup"})
    harness = None
    try:
        harness = Harness(job, channel, broker, runner=runner, control=control)
        harness.checks["worker_boot"] = {
            "spare": bool(job.get("spare")),
            "booted": runner is not None,
            "control_booted": control is not None,
            "job_wait_s": round(job_wait_s, 3),
            "zygote": "zygote" in spawn.FORKED_FROM,  # forked from its service's zygote, not executed
        }
        if "spare_weight" in job:  # booted at a spare's niceness, put back for the job
            harness.checks["worker_boot"]["weight_restored"] = job["spare_weight"]
        harness.checks["worker_boot"].update(BOOT_NOTES)
        harness.checks["cores"] = cores.current().summary()
        result = harness.run()
    except Failure as failure:
        result = dict(failure.fields)
    except BaseException as exc:  # a bug on our side, or the machine
        where = harness.stage_name if harness else "setup"
        result = {
            "stage": "runtime",
            "blame": "infrastructure",
            "error": f"kevin worker failed during {where}: " + short_exception(exc),
        }
    if harness is not None:
        harness.stage_seconds[harness.stage_name] = round(time.perf_counter() - harness.stage_started, 4)
        result.setdefault("flags", []).extend(harness.flags)
        result.setdefault("compiled", harness.compiled)
        result["checks"] = dict(harness.checks, trace=harness.trace)
        with contextlib.suppress(Exception):  # a statistic: never the verdict's failure
            result["checks"]["device_memory"] = harness.device_memory()
        stages = [["job", job_at], ["compile", broker_at], *harness.stage_log]  # the broker's start
        result["checks"]["timeline"] = timeline(started, stages, devlock.SECTIONS)
        result["stage_seconds"] = harness.stage_seconds
        result["builds"] = harness.builds
        result["versions"] = versions(harness.torch)
        result["device_name"] = harness.torch.cuda.get_device_name() if harness.is_cuda else "cpu"
    sys.stdout.flush()
    sys.stderr.flush()
    channel.send({"event": "result", "result": result})
    # Wait for the parent's kill: exiting now would hand any orphan below this subreaper to init
    # before the parent walks the tree; a faulted CUDA context can also hang on exit.
    time.sleep(float(job.get("linger_s", 60.0)))
    os._exit(0)


def versions(torch: Any) -> dict[str, str]:
    from kevin import __version__

    return {
        "kevin": __version__,
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "python": platform.python_version(),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv))
