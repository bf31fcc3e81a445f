"""torch's own extension build (`load_inline` or `load`), run by the build broker
(kevin.evaluator.broker) in a throwaway Python process, for sources the fast path
(kevin.evaluator.fastbuild) does not take.

`run` writes the call's arguments to a spec file and starts `SCRIPT` on it. The script builds with
torch's function, but its last step (importing the module) is replaced by returning the library's
path, so no candidate code runs in it; and torch's ninja step is replaced by one that ends the build
at its first failed command (ninja itself lets every running command finish first: main.cpp's 20-30
s behind a syntax error in cuda.cu). Anything unexpected in torch's private functions leaves torch's
own step in place. The result (ok, the exception's type and text) comes back in a JSON file.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kevin.evaluator import fastbuild

SCRIPT = r"""
import inspect, json, os, signal, subprocess, sys
spec = json.load(open(sys.argv[1]))
result = {"ok": False, "error_type": "SystemError", "error": "kevin: the build process did not finish"}


def run_ninja_to_the_first_failure(build_directory, verbose, error_prefix):
    # torch's _run_ninja_build (`ninja -v`, its -j, the output in its RuntimeError), except that the
    # first failed command ends the build: ninja itself waits for every command still running
    # (main.cpp's pybind11 and torch headers: 20-30 s) before it reports a failure. ninja takes a
    # signal only while it waits for its commands, so the failed command's output is printed in
    # full before SIGTERM stops the others. (A line that starts with FAILED: is ninja's: compilers
    # prefix theirs with a file, a program or spaces.)
    workers = ce._get_num_workers(verbose)
    ninja = subprocess.Popen(
        ["ninja", "-v", *(["-j", str(workers)] if workers is not None else [])],
        cwd=build_directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    lines, stopped = [], False
    for line in ninja.stdout:
        lines.append(line)
        if not stopped and line.startswith((b"FAILED: ", b"\x1b[31mFAILED: ")):
            ninja.send_signal(signal.SIGTERM)
            stopped = True
    if ninja.wait() == 0:
        return
    if stopped and lines[-1:] == [b"ninja: build stopped: interrupted by user.\n"]:
        lines[-1] = b"ninja: build stopped: subcommand failed.\n"  # what it says once the others end
    output = b"".join(lines).decode(errors="replace")
    raise RuntimeError(f"{error_prefix}: {output}" if output else error_prefix)


try:
    import torch.utils.cpp_extension as ce
    if not callable(getattr(ce, "_import_module_from_library", None)):
        raise SystemError("kevin: this torch has no _import_module_from_library: the broker will not build by loading")
    # torch's last step imports (runs) the library: here it only names it.
    ce._import_module_from_library = lambda name, path, is_python_module: os.path.join(path, name + ce.LIB_EXT)
    # A torch whose ninja step is not the one run_ninja_to_the_first_failure stands in for builds its own way.
    if (
        os.name == "posix"
        and callable(getattr(ce, "_get_num_workers", None))
        and callable(getattr(ce, "_run_ninja_build", None))
        and list(inspect.signature(ce._run_ninja_build).parameters) == ["build_directory", "verbose", "error_prefix"]
    ):
        ce._run_ninja_build = run_ninja_to_the_first_failure
    getattr(ce, spec["function"])(**spec["kwargs"])
    result = {"ok": True, "error_type": "", "error": ""}
except BaseException as exc:
    result = {"ok": False, "error_type": type(exc).__name__, "error": str(exc)}
with open(spec["result"], "w") as handle:
    json.dump(result, handle)
"""


def run(
    function: str,
    kwargs: dict[str, Any],
    directory: Path,
    timeout: float,
    overrides: dict[str, str],
    readable: Sequence[str | Path] = (),
) -> tuple[bool, str, str]:
    """Run torch's `function` (load_inline or load) in a throwaway process: (ok, error_type, error).
    The process and its compilers are jailed in `directory` (fastbuild.run_killable), reading
    `readable` besides the system's and Python's directories."""
    result = directory / ".kevin-build-result.json"
    spec = directory / ".kevin-build-spec.json"
    spec.write_text(json.dumps({"function": function, "kwargs": kwargs, "result": str(result)}))
    command = [
        sys.executable,
        *(["-P"] if sys.version_info >= (3, 11) else []),
        "-c",
        SCRIPT,
        str(spec),
    ]
    returncode, output = fastbuild.run_killable(
        command, directory, timeout, env={**os.environ, **overrides}, readable=readable
    )
    try:
        done = json.loads(result.read_text())
    except (OSError, ValueError):
        if returncode < 0:
            return False, "TimeoutError", f"the build took more than {timeout:.0f} s"
        return (
            False,
            "SystemError",
            f"kevin: the build process ended without a result (exit {returncode}): {output[-2000:]}",
        )
    finally:
        spec.unlink(missing_ok=True)
        result.unlink(missing_ok=True)
    return bool(done.get("ok")), str(done.get("error_type", "")), str(done.get("error", ""))
