"""Build what every evaluation needs once per toolchain before the first one asks for it.

A worker's build broker (kevin.evaluator.broker) makes two things before its first build: kevin's
shim for fast builds and the symbol check's reference binding, each a full torch extension build
(about a minute on 2 cores, most of the H200 learning run's 207-227 s step-0 held-out evaluation
against 58-75 s for the later ones). They are built once, under locks, into the toolchain folder,
so whoever comes first builds and the rest read. A judge that has other work before its first
evaluation (the learning run's supervised phase, a trainer loading its model) can start that build
now, in the background:

    prebuild = service.prepare()    # kevin.evaluator.service.EvaluationService; returns at once
    ...                             # later jobs wait on the same locks instead of building again
    prebuild.result()               # (True, "ready in 61.2 s") or (False, the reason), when wanted

It runs `python -m kevin.evaluator.prebuild BUILD_CACHE`: the broker's own `prepare()` in a process
with a worker's scrubbed environment (so the toolchain keys match the workers'), killed with the
process that started it. Nothing of a candidate is involved. A failure is not fatal: the first
worker tries again and each build then reports why it cannot be checked.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kevin.evaluator import cores
from kevin.evaluator.sandbox import scrubbed_env


class Prebuild:
    """A background build of the toolchain pieces (see the module's docstring)."""

    def __init__(self, build_cache: Path, *, fast: bool = True) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="kevin-prebuild-"))
        self.log_path = self.workdir / "prebuild.log"
        command = [sys.executable, "-m", "kevin.evaluator.prebuild", str(build_cache)]
        if not fast:
            command.append("--no-fast")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.workdir,
                env=scrubbed_env(self.workdir, ""),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._outcome: tuple[bool, str] | None = None

    def done(self) -> bool:
        return self._outcome is not None or self.process.poll() is not None

    def result(self, timeout: float | None = None) -> tuple[bool, str]:
        """(ok, the log's last line) once the build has ended; raises subprocess.TimeoutExpired."""
        if self._outcome is None:
            code = self.process.wait(timeout)
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
            last = lines[-1] if lines else f"exit {code}"
            self._outcome = (code == 0, last)
            shutil.rmtree(self.workdir, ignore_errors=True)
        return self._outcome

    def stop(self) -> None:
        """End a build still running (the next builder starts it again under the lock)."""
        if self.process.poll() is None:
            self.process.kill()
        self.result()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kevin.evaluator.prebuild", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "build_cache", type=Path, help="the evaluations' build cache (EvalConfig.cache_root/builds)"
    )
    parser.add_argument("--no-fast", action="store_true", help="builds are not fast builds: no shim")
    args = parser.parse_args(argv)
    cores.at_start()  # its compilers keep off the cores kept for timing
    from kevin.evaluator import confine
    from kevin.evaluator.broker import Broker

    confine.die_with_parent()
    started = time.monotonic()
    try:
        args.build_cache.mkdir(parents=True, exist_ok=True)
        Broker(args.build_cache, fast=not args.no_fast).prepare()
    except Exception as exc:  # noqa: BLE001 - reported; the first worker tries again
        print(f"kevin prebuild: failed: {type(exc).__name__}: {str(exc)[-400:]}".replace("\n", " "))
        return 1
    print(f"kevin prebuild: ready in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
