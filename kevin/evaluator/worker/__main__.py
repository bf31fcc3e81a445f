"""Entry point: `python -m kevin.evaluator.worker JOB_JSON CHANNEL_FD` (started by kevin.evaluator.sandbox)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kevin.evaluator import confine
from kevin.evaluator.confine import Channel
from kevin.evaluator.worker.harness import Harness
from kevin.evaluator.worker.support import (
    Failure,
    short_exception,
)


def _prepare_shim(job: dict[str, Any]) -> None:
    """Build (once per toolchain) and load the fast builds' shim while this process may still write
    its directory: once confined, the candidate can read the shim but not replace it."""
    if not job.get("fast_build", True):
        return
    try:
        from kevin.evaluator import fastbuild

        fastbuild.ensure_shim(Path(job["build_cache"]))
    except Exception:  # noqa: BLE001 - without a shim every build takes the real load_inline
        pass


def main(argv: list[str]) -> int:
    job_path = Path(argv[1])
    job = json.loads(job_path.read_text())
    job_path.unlink()  # the secret seed and the channel token are not left lying around
    channel = Channel(int(argv[2]), job.pop("channel_token"))
    confine.die_with_parent()
    confine.hide_channel_argument(argv)
    # Building the shim (once per toolchain, ~30-60 s) is build work: under the compile deadline.
    channel.send({"event": "stage", "stage": "compile"})
    _prepare_shim(job)
    channel.send({"event": "stage", "stage": "setup"})
    confinement = confine.confine_worker(job)
    harness = None
    try:
        harness = Harness(job, channel)
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
        result["checks"] = dict(harness.checks, trace=harness.trace, confinement=confinement)
        result["stage_seconds"] = harness.stage_seconds
        result["builds"] = harness.build_log.to_list()
        result["versions"] = _versions(harness.torch)
        result["device_name"] = harness.torch.cuda.get_device_name() if harness.is_cuda else "cpu"
    sys.stdout.flush()
    sys.stderr.flush()
    channel.send({"event": "result", "result": result})
    # Wait for the parent's kill: exiting now would hand any orphan below this subreaper to init
    # before the parent walks the tree. Never tear down the interpreter: candidate objects could
    # run code from __del__ or atexit after the verdict, and a faulted CUDA context can hang on exit.
    time.sleep(float(job.get("linger_s", 60.0)))
    os._exit(0)


def _versions(torch: Any) -> dict[str, str]:
    import platform

    from kevin import __version__

    return {
        "kevin": __version__,
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "python": platform.python_version(),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv))
