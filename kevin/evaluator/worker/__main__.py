"""Entry point: `python -m kevin.evaluator.worker JOB_FD CHANNEL_FD` (started by kevin.evaluator.sandbox).

The job (secret seed, channel token, sources) arrives on JOB_FD, a pipe the supervisor writes and
closes: it is never in a file another process could read. This process is the judge: it never
imports the candidate (kevin.evaluator.worker.runner does, in a confined process of its own).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from kevin.evaluator import confine
from kevin.evaluator.confine import Channel
from kevin.evaluator.worker.harness import Harness
from kevin.evaluator.worker.support import Failure, short_exception


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


def main(argv: list[str]) -> int:
    job = read_job(int(argv[1]))
    channel = Channel(int(argv[2]), job.pop("channel_token"))
    confine.die_with_parent()
    confine.hide_channel_argument(argv)
    confine.become_subreaper()
    # Building the shim (once per toolchain, ~30-60 s) is build work: under the compile deadline.
    channel.send({"event": "stage", "stage": "compile"})
    Path(job["build_cache"]).mkdir(parents=True, exist_ok=True)
    broker = start_broker(job)
    channel.send({"event": "stage", "stage": "setup"})
    harness = None
    try:
        harness = Harness(job, channel, broker)
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
