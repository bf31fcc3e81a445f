"""The runner: the only process that loads candidate code. It runs what it is told and judges nothing.

Started by the judge (kevin.evaluator.worker.judge) as
`python -m kevin.evaluator.worker.runner SOCKET_FD AREA_FD`, confined before any candidate code
exists, it answers the judge's commands over the socket (kevin.evaluator.worker.exchange):

  setup      import torch, take the device, fix the strict flags and the CPU thread count, load the
             problem (for get_inputs and the init inputs only).
  cycles     timed cycles, driven and clocked by the judge: for call i, refill the inputs from the
             seed the judge gives at that moment, flush the L2, run the model (none while the
             process is still clean: that measures the cycle's own overhead), synchronize the whole
             device, answer DONE; on FETCH, copy the last output into the shared area.
  load       import the candidate (kind `candidate`) or the problem again (kind `reference`, in a
             runner that will never see a candidate: the baseline's) and build the model from the
             weight seed. Builds go through the judge's build broker when one is offered.
  trial      draw one trial's inputs from the seed given now, run the model on clones, copy the
             outputs into the shared area; report whether inputs changed and output oddities.
  trace      one call under the profiler: how much of the work was library work (kevin.evaluator.probes).
  state      torch's global flags and Python thread count, for the judge to compare.

Everything this process reports is untrusted: the judge compares outputs itself, times with its
own clock, and treats the trace and state as evidence that can only hurt the candidate. The judge
kills this process (and everything it started) when it is done with it; it never exits on its own
except when the judge's socket closes.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any

from kevin.evaluator import confine
from kevin.evaluator.worker.exchange import (
    DONE,
    FETCH,
    FETCHED,
    GO,
    SEED,
    STOP,
    Link,
    SharedArea,
    input_views,
    write_outputs,
)
from kevin.evaluator.worker.support import (
    DTYPES,
    cast_floating,
    flatten_outputs,
    load_module,
    short_exception,
)


class Runner:
    def __init__(self, link: Link, area: SharedArea) -> None:
        self.link, self.area = link, area
        self.model: Any = None
        self.modules: list[Any] = []
        self.last_output: list[Any] = []
        self.profiler_imports: int | None = None
        """Modules the profiler's warm-up imported (None: not warmed): 0 where the judge preloaded them."""

    # -- commands ------------------------------------------------------------------------------------
    def boot(self, job: dict[str, Any]) -> dict[str, Any]:
        """Start torch before any problem or candidate exists: what a spare worker's runner does
        before its job. Nothing here touches the device (`context` does, under the judge's lock).
        The reply says where the time went (diagnostics for the judge's checks, from a clean
        runner, never a timing)."""
        started = time.perf_counter()
        import torch

        from kevin.evaluator import probes

        seconds = {"import": time.perf_counter() - started}
        self.torch, self.booted = torch, job
        self.device = job["device"]
        self.is_cuda = self.device.startswith("cuda")
        # Bound now, before any candidate exists: one that replaces torch.cuda.synchronize (or the
        # C function it calls) would otherwise make every timed call's DONE come before the device
        # is done, and its work pile up behind the next fetch (bench/adversarial/
        # clock_patched_synchronize_cuda.py, caught dynamically only by `deferred_work` then).
        self.device_sync = getattr(torch._C, "_cuda_synchronize", None) or torch.cuda.synchronize
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_grad_enabled(False)
        torch.set_num_threads(int(job["cpu_threads"]))
        self.flush = None
        # Threads torch starts lazily (the intra-op pool, the profiler's) exist before the judge
        # counts this process's threads, so only threads the candidate starts are new.
        torch.ones(1 << 16).sum()
        self.traced = bool(job.get("traced", True))
        if self.traced and not self.is_cuda:
            profiler_started = time.perf_counter()
            self.profiler_imports = probes.warm_profiler(False)
            seconds["profiler"] = time.perf_counter() - profiler_started
        seconds["boot"] = time.perf_counter() - started
        return {
            "ok": True,
            "pid": os.getpid(),
            "seconds": {k: round(v, 3) for k, v in seconds.items()},
            "profiler_imports": self.profiler_imports,
        }

    def context(self, _: dict[str, Any]) -> dict[str, Any]:
        """The runner's device work before its problem: the CUDA context and the L2 flush buffer (the
        driver clears a fresh allocation on the device). The judge sends it while it holds the
        device's lock shared (kevin.evaluator.devlock), so none of it runs inside another worker's
        timing; nothing to do on the CPU back end."""
        seconds: dict[str, float] = {}
        if self.is_cuda:
            torch, started = self.torch, time.perf_counter()
            torch.cuda.set_device(self.device)
            torch.zeros(1, device=self.device)
            seconds["cuda"] = time.perf_counter() - started
            if self.booted.get("flush_l2", True):
                props = torch.cuda.get_device_properties(self.device)
                l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
                self.flush = torch.empty(
                    max(2 * l2_bytes, 256 * 2**20) // 4, dtype=torch.int32, device=self.device
                )
            torch.cuda.synchronize()
        return {"ok": True, "seconds": {k: round(v, 3) for k, v in seconds.items()}}

    def warm(self, _: dict[str, Any]) -> dict[str, Any]:
        """CUPTI's start for the trace, on the GPU back end (the CPU one warms at boot): the profiler
        started and stopped once, so the trace under the device lock does not pay it. Sent after
        `context`, with the lock let go: it runs nothing on the device. In s34's H100 run it took 0.11 s
        (median) in a forked runner, 5-9 s in one executed afresh (its imports), which timings waited
        for while it was inside the shared section."""
        seconds: dict[str, float] = {}
        if self.is_cuda and self.traced:
            from kevin.evaluator import probes

            started = time.perf_counter()
            self.profiler_imports = probes.warm_profiler(True)
            seconds["profiler"] = time.perf_counter() - started
        return {
            "ok": True,
            "seconds": {k: round(v, 3) for k, v in seconds.items()},
            "profiler_imports": self.profiler_imports,
        }

    def setup(self, job: dict[str, Any]) -> dict[str, Any]:
        """The problem (after `boot`): its init inputs and the means to draw trial inputs."""
        from kevin.evaluator import inputs as trial_inputs

        torch = self.torch
        self.job = job
        self.dtype = getattr(torch, DTYPES[job["precision"]])
        problem = load_module(job["problem_source"], "kevin_problem", "<problem>")
        self.init_inputs = list(problem.get_init_inputs())
        self.problem = problem
        self.fresh = trial_inputs.FreshInputs(problem, self.device, self.dtype)
        self.trial_inputs = trial_inputs
        return {"ok": True}

    def load(self, message: dict[str, Any]) -> dict[str, Any]:
        from kevin.evaluator import build

        torch = self.torch
        self.build_log = build.BuildLog()
        seq = message.get("seq")

        def request_build(arguments: dict[str, Any]) -> dict[str, Any]:
            # Asked in the middle of `load`: the judge answers before it reads the load's reply.
            self.link.send({"build": arguments, "seq": seq})
            answer = self.link.receive()
            return answer.get("built") if isinstance(answer.get("built"), dict) else {"ok": False}

        build.install_client(request_build, self.build_log)
        confinement = self.job.get("confinement", {})
        try:
            module = load_module(message["source"], "kevin_model", message.get("filename", "<model>"))
        except BaseException as exc:
            return {
                "ok": False,
                "stage": "compile",
                "error": short_exception(exc),
                "builds": self.build_log.to_list(),
            }
        model_class = getattr(module, message["class_name"], None)
        if not isinstance(model_class, type):
            return {
                "ok": False,
                "stage": "compile",
                "error": f"the candidate defines no class {message['class_name']}",
            }
        try:
            torch.manual_seed(int(self.job["weight_seed"]))
            self.model = cast_floating(model_class(*self.init_inputs).to(self.device), self.dtype)
            if message.get("compile"):
                self.model = torch.compile(self.model)
        except BaseException as exc:
            return {"ok": False, "stage": "runtime", "error": short_exception(exc)}
        self.modules = self.build_log.modules
        return {"ok": True, "builds": self.build_log.to_list(), "confinement": confinement}

    def trial(self, message: dict[str, Any]) -> dict[str, Any]:
        from kevin.evaluator import probes

        torch = self.torch
        inputs = self._draw(int(message["seed"]), message.get("shift"))
        args = [torch.clone(a) if isinstance(a, torch.Tensor) else a for a in inputs]
        try:
            out = flatten_outputs(self.model(*args))
            self._sync()
        except BaseException as exc:
            return {"ok": False, "stage": "runtime", "error": short_exception(exc)}
        flags = []
        if message.get("probe_outputs"):
            flags += probes.output_flags(out, self._sync)
        if not all(
            torch.equal(a, b) for a, b in zip(args, inputs, strict=True) if isinstance(a, torch.Tensor)
        ):
            flags.append("inputs_mutated")
        metas = write_outputs(self.area, out)
        if isinstance(metas, str):
            return {"ok": False, "stage": "correctness", "error": metas}
        return {"ok": True, "outputs": metas, "flags": flags}

    def trace(self, message: dict[str, Any]) -> dict[str, Any]:
        from kevin.evaluator import attribution, probes

        inputs = self._draw(int(message["seed"]), None)
        try:
            trace = probes.trace_forward(
                lambda: self.model(*attribution.fresh_inputs(inputs)),
                self.is_cuda,
                self._sync,
                self.modules,
            )
        except BaseException as exc:
            return {"ok": False, "stage": "runtime", "error": short_exception(exc)}
        return {"ok": True, "trace": trace}

    def state(self, _: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        return {
            "ok": True,
            "python_threads": threading.active_count(),
            "flags": {
                "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                "float32_matmul_precision": torch.get_float32_matmul_precision(),
                "num_threads": torch.get_num_threads(),
            },
        }

    # -- timed cycles --------------------------------------------------------------------------------
    def cycles(self, message: dict[str, Any]) -> dict[str, Any]:
        """Answer timed cycles until STOP. With `model` false the call is skipped (overhead cycles);
        the output to fetch is then a buffer of `output_bytes`. With `trim`, what they drew on the
        device goes back to the driver afterwards (torch's cache would keep it: the calibration runs
        admitted for its moment only, and s46's H100 A/A pass ran out of device memory when 16
        runners kept their calibration's inputs through their compiles)."""
        try:
            return self._cycles(message)
        finally:
            if message.get("trim") and self.is_cuda:
                self.torch.cuda.empty_cache()

    def _cycles(self, message: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        use_model = bool(message.get("model"))
        spin = bool(message.get("spin"))
        shared = message.get("inputs")  # CPU back end: the judge writes every call's inputs here
        buffers = (
            input_views(self.area, shared) if shared is not None else self._draw(int(message["seed"]), None)
        )
        output_start = int(message.get("output_start", 0))
        # Written once, so a clean fetch copies real pages: an untouched CPU buffer is read from the
        # kernel's one zero page, faster than any output (kevin.evaluator.worker.fetchcheck,
        # FETCH_CLEAN_MARGIN).
        placeholder = [
            torch.zeros(int(message.get("output_bytes", 0)), dtype=torch.uint8, device=self.device)
        ]
        self.link.send({"ok": True, "ready": True, "seq": message.get("seq")})
        words = self.area.words
        done = fetched = 0
        out: list[Any] = placeholder
        while True:
            order = self._next_order(spin, words, done, fetched)
            if order[0] == "stop":
                return {"ok": True, "stopped": True}
            if order[0] == "fetch":
                fetched = order[1]
                copy_started = time.perf_counter_ns()
                metas = write_outputs(self.area, out, output_start)
                copy_ns = time.perf_counter_ns() - copy_started  # the judge's diagnosis only: not trusted
                self._answer(
                    spin, words, FETCHED, fetched, {"fetched": fetched, "outputs": metas, "copy_ns": copy_ns}
                )
                continue
            call, seed = order[1], order[2]
            try:
                if shared is None:
                    self.fresh.fill(buffers, seed)
                if self.flush is not None:
                    self.flush.zero_()
                out = flatten_outputs(self.model(*buffers)) if use_model else placeholder
                self._sync()
            except BaseException as exc:
                if spin:
                    words[DONE] = -1  # the judge is spinning on DONE: tell it to read the socket
                return {"ok": False, "stage": "runtime", "error": "while timing:\n" + short_exception(exc)}
            done = call
            self._answer(spin, words, DONE, call, {"done": call})

    def _next_order(self, spin: bool, words: Any, done: int, fetched: int) -> tuple:
        if not spin:
            message = self.link.receive()
            if "go" in message:
                return ("go", int(message["go"]), int(message["seed"]))
            if "fetch" in message:
                return ("fetch", int(message["fetch"]))
            return ("stop",)
        while True:
            if words[STOP]:
                return ("stop",)
            if words[GO] > done:
                return ("go", int(words[GO]), int(words[SEED]))
            if words[FETCH] > fetched:
                return ("fetch", int(words[FETCH]))

    def _answer(self, spin: bool, words: Any, slot: int, value: int, message: dict[str, Any]) -> None:
        if spin:
            if slot == FETCHED and not self.area.post(message):
                self.link.send(message)  # too long for the control block: the socket
            words[slot] = value
        else:
            self.link.send(message)

    # -- helpers -------------------------------------------------------------------------------------
    def _draw(self, seed: int, shift: int | None) -> list[Any]:
        return self.trial_inputs.draw(self.problem.get_inputs, seed, shift, self.device, self.dtype)

    def _sync(self) -> None:
        """The whole device synchronized (the current one: `context` set it), through the function
        bound at `boot`."""
        if self.is_cuda:
            self.device_sync()


COMMANDS = ("boot", "context", "warm", "setup", "load", "trial", "trace", "state", "cycles")


def serve(link: Link, area: SharedArea) -> None:
    runner = Runner(link, area)
    while True:
        try:
            message = link.receive()
        except Exception:  # the judge is gone
            return
        command = message.get("cmd")
        if command == "exit" or command not in COMMANDS:
            return
        try:
            reply = getattr(runner, command)(message.get("job") if command in ("boot", "setup") else message)
        except BaseException as exc:  # our bug, or the candidate's doing: the judge decides which
            reply = {"ok": False, "stage": "runtime", "error": short_exception(exc)}
        link.send({**reply, "seq": message.get("seq")})


def main(argv: list[str]) -> int:
    import resource
    import signal

    confine.die_with_parent()
    # What the candidate prints goes to the worker's log: no file it writes grows past this.
    limit = int(os.environ.get("KEVIN_MAX_FILE_BYTES", 64 << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[1]))
    area_fd = int(argv[2])
    area = SharedArea(os.fstat(area_fd).st_size - 4096, fd=area_fd)
    serve(Link(sock, owner_pid=os.getpid()), area)
    sys.stdout.flush()
    time.sleep(0.01)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
