"""The judge's hold on one runner: start it, send commands, drive and clock timed cycles, end it.

`RunnerHandle` starts `python -m kevin.evaluator.worker.runner` with a socket pair and the shared
area (kevin.evaluator.worker.exchange) as inherited descriptors, in a PID namespace of its own where
the kernel offers one (kevin.evaluator.confine.spawn_confined), so ending the runner ends everything
it started. `request` sends a command and returns the reply, raising `RunnerFailed` with the
runner's own account (stage, error) when it failed or broke the protocol.

`run_cycles` is the timing protocol's judge side. For each call it writes a fresh seed, notes its
own clock, releases the call and waits for DONE; the call's time is what its clock saw. Nothing the
runner reports enters a time. Sampled calls (chosen here, secretly, after DONE) are FETCHed: their
outputs are checked later against the reference on the same seed, and the fetch itself is timed, so
an output computed only when asked for shows up as a slow fetch (kevin.evaluator.worker.timed).
"""

from __future__ import annotations

import functools
import signal
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kevin.evaluator import procfs, spawn
from kevin.evaluator.worker import exchange
from kevin.evaluator.worker.exchange import (
    DONE,
    FETCH,
    FETCHED,
    GO,
    POSTED,
    SEED,
    STOP,
    ExchangeError,
    Link,
    SharedArea,
)
from kevin.evaluator.worker.support import Failure

_perf_ns = time.perf_counter_ns

POSTED_READ_S = 0.01
"""How long the judge reads a posted reply again before it calls the protocol broken (`_posted_reply`)."""


MAX_BUILDS = 16
"""Builds one candidate may ask for (each is a load_inline call at import)."""


class RunnerFailed(Exception):
    """The runner failed a command (its account: stage, error), died, or broke the protocol
    (`tampering`: a reply to another command, a malformed line, something kevin's runner never
    sends; once candidate code is loaded that is the candidate's doing)."""

    def __init__(self, reply: dict[str, Any], tampering: bool = False) -> None:
        super().__init__(str(reply.get("error", "the runner failed")))
        self.stage = str(reply.get("stage", "runtime"))
        self.error = str(reply.get("error", "the runner failed"))[:20000]
        self.tampering = tampering

    def failure(self, stage: str | None = None, **fields: Any) -> Failure:
        """The candidate's failure (`tampering` when it broke the protocol); `during` (the judge's
        stage) only words a timeout."""
        fields.pop("during", None)
        flags = ["tampering"] if self.tampering else []
        return Failure(stage or self.stage, self.error, flags=flags, **fields)


class CallTimedOut(RunnerFailed):
    """A call of candidate code ran past its deadline; the runner was killed. Always `timeout`."""

    def __init__(self, deadline_s: float) -> None:
        super().__init__(
            {
                "stage": "timeout",
                "error": f"a call of the candidate ran past {deadline_s:.1f} s (kevin's limit per call: "
                f"{CALL_FACTOR:g}x the reference's call, at least {CALL_FLOOR_S:g} s) and was killed",
            }
        )

    def failure(self, stage: str | None = None, **fields: Any) -> Failure:
        during = fields.pop("during", None)
        return Failure("timeout", self.error + (f" during {during}" if during else ""), **fields)


CALL_FLOOR_S = 2.0
"""No call of candidate code is cut before this many seconds."""
FIRST_CALL_FLOOR_S = 10.0
"""The first call's floor: it may load modules, compile kernels or create handles."""
JIT_FIRST_CALL_FLOOR_S = 60.0
"""The first call's floor for the triton back end. Triton compiles on the first launch, in the
runner: each kernel's PTX and cubin (ptxas), and, once per signature, a C launcher built with the
host's C compiler (its driver helpers too, on a cold cache); an @triton.autotune kernel compiles and
benchmarks every config in that call. A few seconds per kernel idle, several times that on a host
busy with a batch's builds: 10 s would kill honest candidates. Later calls keep the usual floor."""
CALL_FACTOR = 50.0
"""A call may take this many times the reference's (measured by the judge on the same inputs)."""


def call_deadline_s(reference_s: float, first: bool = False, jit: bool = False) -> float:
    """The longest one call of candidate code may take before its runner is killed; `jit` for a first
    call that compiles its kernels (the triton back end)."""
    floor = (JIT_FIRST_CALL_FLOOR_S if jit else FIRST_CALL_FLOOR_S) if first else CALL_FLOOR_S
    return max(floor, CALL_FACTOR * reference_s)


_PR_SET_NAME = 15
RUNNER_NAME = b"kevin-runner"
"""A forked runner's name (/proc/PID/comm); its command line is its judge's."""


def _run_forked(argv: list[str], home: str, prepare: Callable[[], None]) -> int:
    """A forked runner's start (kevin.evaluator.spawn, fork mode: its descriptors, folder and
    environment already its own), where `python -m` would begin: its arguments, its folder first on
    the path, no exchange area of the judge's mapped."""
    import ctypes

    ctypes.CDLL(None).prctl(_PR_SET_NAME, RUNNER_NAME, 0, 0, 0)  # in `ps`, where its command line is the judge's
    exchange.unmap_inherited()
    sys.argv = [argv[0], *argv[1:]]
    sys.path[0] = home
    prepare()
    from kevin.evaluator.worker import runner

    return runner.main(sys.argv)


def _broken(what: str) -> RunnerFailed:
    return RunnerFailed(
        {"stage": "runtime", "error": f"the candidate's process broke kevin's protocol: {what}"}, True
    )


@dataclass
class CycleRecord:
    """What the judge's clock saw: ns per timed call, ns per fetch of a sampled call's output."""

    cycle_ns: list[int] = field(default_factory=list)
    warm_ns: list[int] = field(default_factory=list)
    fetch_ns: dict[int, int] = field(default_factory=dict)
    """Timed-call index -> ns the fetch of its output took."""
    copy_ns: dict[int, int] = field(default_factory=dict)
    """Timed-call index -> ns the runner says its copy of the output into the area took (part of
    the fetch; a figure for diagnosing slow fetches, never for judging: the runner may lie)."""
    outputs: dict[int, Any] = field(default_factory=dict)
    """Timed-call index -> what `on_fetch` made of that call's outputs (read before the next fetch)."""
    seeds: list[int] = field(default_factory=list)
    """The input seed of each timed call, in order."""
    settled: bool = False
    """Whether the warm-up ended warm (`warm`: settled cycles, or long ones) rather than on its cap."""


SETTLE_MS = 250.0
"""Most warm-up time spent, after the asked-for warm-up, waiting for the cycles to settle."""
SETTLE_WINDOW = 16
SETTLE_RELATIVE = 0.03
SETTLE_ABSOLUTE_NS = 2_000
MAX_WARM_CYCLES = 4000


SETTLE_SPAN = 4
"""Windows from the first compared to the last: a slow drift must stay within the bound over all."""
SETTLE_LONG_NS = 1_000_000
"""Cycles at least this long need no settling: the asked-for warm-up has already kept the device busy
for many of them."""


def settled(warm_ns: list[int]) -> bool:
    """Whether the median of the last SETTLE_WINDOW warm-up cycles is within 3% (or 2 us) of the
    median of the window SETTLE_SPAN - 1 windows earlier. An idle GPU runs at a fraction of its clock
    and takes a while to come up; an overhead measured on the way up is too large, and every call
    timed later at full clock then looks that much faster (on the H200 a 7 us kernel came out at 0
    and was flagged)."""
    if len(warm_ns) < SETTLE_SPAN * SETTLE_WINDOW:
        return False
    last = statistics.median(warm_ns[-SETTLE_WINDOW:])
    first = statistics.median(warm_ns[-SETTLE_SPAN * SETTLE_WINDOW : (1 - SETTLE_SPAN) * SETTLE_WINDOW])
    return abs(last - first) <= max(SETTLE_RELATIVE * first, SETTLE_ABSOLUTE_NS)


def warm(warm_ns: list[int]) -> bool:
    """Settled, or made of cycles too long to need it."""
    return settled(warm_ns) or (
        len(warm_ns) >= SETTLE_WINDOW and statistics.median(warm_ns[-SETTLE_WINDOW:]) >= SETTLE_LONG_NS
    )


class RunnerHandle:
    def __init__(
        self, area_bytes: int, *, lock: Any, env: dict[str, str], cwd: str, forked: Callable[[], None] | None = None
    ) -> None:
        """Start a runner confined by `lock` (a kevin.evaluator.confine.LockDown applied before its
        exec, so every thread it ever has is under it) in a PID namespace of its own. With `forked`,
        the runner is a fork of this process (kevin.evaluator.spawn.forkable must say it may be) that
        calls `forked()` (what its start would have set: the heap's policy) and then the runner's main,
        under the same lock: it starts with the modules this process has imported."""
        self.started = time.perf_counter()
        judge_end, runner_end = socket.socketpair()
        self.area = SharedArea(area_bytes)
        command = [
            sys.executable,
            "-m",
            "kevin.evaluator.worker.runner",
            str(runner_end.fileno()),
            str(self.area.fd),
        ]
        target = None if forked is None else functools.partial(_run_forked, command[2:], cwd, forked)
        try:
            self.process = spawn.spawn_confined(
                command, pass_fds=(runner_end.fileno(), self.area.fd), env=env, cwd=cwd, lock=lock, target=target
            )
        finally:
            runner_end.close()
        self.namespace = self.process.pid_namespace
        self.confinement = {
            "forked": forked is not None,
            "pid_namespace": self.namespace,
            "namespace_reason": self.process.reason,
            "lockdown": self.process.lockdown or {},
        }
        self.link = Link(judge_end)
        self.pid = self.process.pid
        self.sequence = 0
        self.deadline_s: float | None = None
        """While set, the longest wait for one message of the runner (`receive`)."""
        self.killed = False
        self.boot_reply: dict[str, Any] | None = None
        """The reply to `boot` once collected (by a booting spare, else by the judge's runner_ready)."""
        self.context_reply: dict[str, Any] | None = None
        """The reply to `context` (its device work, done under the device's lock) once collected."""
        self.warm_sent = False
        """Whether `warm` (the profiler's start, outside the lock) was sent by a booting spare."""
        self.warm_reply: dict[str, Any] | None = None
        """The reply to `warm` once collected (by the judge's runner_ready)."""

    # -- commands ------------------------------------------------------------------------------------
    def request(
        self, command: str, builds: Any = None, deadline_s: float | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Send a command; its reply must echo the command's sequence number. While a `load` runs,
        the runner may ask for builds first (`{"build": arguments}`): `builds(arguments)` answers
        each (the judge's build broker), at most MAX_BUILDS of them. With `deadline_s`, a reply
        later than that kills the runner (`CallTimedOut`)."""
        self.send(command, **fields)
        with self._deadline(deadline_s):
            return self.reply(command, builds)

    def send(self, command: str, **fields: Any) -> None:
        """Send a command without waiting: `reply(command)` collects its answer later."""
        self.sequence += 1
        self.link.send({"cmd": command, "seq": self.sequence, **fields})

    def reply(self, command: str, builds: Any = None) -> dict[str, Any]:
        """The reply to the command sent last (see `request`)."""
        reply = self.receive()
        served = 0
        while builds is not None and "build" in reply and reply.get("seq") == self.sequence:
            served += 1
            if served > MAX_BUILDS:
                raise _broken(f"more than {MAX_BUILDS} builds in one load")
            self.link.send({"built": builds(reply["build"]), "seq": self.sequence})
            reply = self.receive()
        if reply.get("seq") != self.sequence or not isinstance(reply.get("ok"), bool):
            raise _broken(f"a reply that does not answer {command!r}")
        if reply["ok"] is not True:
            raise RunnerFailed(reply)
        return reply

    def receive(self) -> dict[str, Any]:
        """The runner's next message; past the current deadline (`deadline_s`, from now) the runner is
        killed and `CallTimedOut` raised."""
        if self.deadline_s is not None:
            self.link.sock.settimeout(self.deadline_s)
        try:
            return self.link.receive()
        except TimeoutError:
            raise self.timed_out(self.deadline_s) from None
        except ExchangeError as exc:
            if "closed" not in str(exc):
                raise _broken(str(exc)) from None
            raise RunnerFailed({"stage": "runtime", "error": self.death()}) from None
        except OSError as exc:
            raise RunnerFailed({"stage": "runtime", "error": f"{self.death()} ({exc})"}) from None
        finally:
            if self.deadline_s is not None and not self.killed:
                self.link.sock.settimeout(None)

    def timed_out(self, deadline_s: float | None) -> RunnerFailed:
        """Kill a runner whose call ran past its deadline: its device context dies with it at once,
        instead of holding the GPU until the stage's wall-clock limit."""
        self.kill()
        return CallTimedOut(deadline_s or 0.0)

    def death(self) -> str:
        """How the runner ended, in words (waiting a moment for the exit status)."""
        code = self.process.poll()
        deadline = time.monotonic() + 2.0
        while code is None and time.monotonic() < deadline:
            time.sleep(0.02)
            code = self.process.poll()
        if code is None:
            return "the runner stopped answering"
        if code < 0:
            try:
                return f"the process crashed with {signal.Signals(-code).name}"
            except ValueError:
                return f"the process was killed by signal {-code}"
        return f"the process exited with code {code}"

    # -- timed cycles --------------------------------------------------------------------------------
    def run_cycles(
        self,
        *,
        model: bool,
        spin: bool,
        seeds: Any,
        warmup_ms: float,
        min_warmup: int,
        budget_ms: float,
        min_reps: int,
        max_reps: int,
        output_bytes: int,
        fetch: Any,
        on_fetch: Any,
        prepare: Any = None,
        inputs: Any = None,
        output_start: int = 0,
        settle_ms: float = SETTLE_MS,
        call_deadline_s: float | None = None,
        plan: Any = None,
        trim: bool = False,
    ) -> CycleRecord:
        """Warm up, then time calls until the budget; `seeds()` gives each call's input seed,
        `fetch(index, reps)` says, after a timed call is DONE, whether to fetch its output, and
        `on_fetch(metas)` reads the fetched outputs out of the shared area (before the next fetch
        reuses it). On the CPU back end `inputs` describes input tensors laid out in the shared area
        (exchange.shared_inputs) and `prepare(seed)` writes each call's fresh inputs there before
        the call starts (outside the clock: the runner only reads them); elsewhere the runner
        refills its inputs from the seed inside the clock. The warm-up goes on past `warmup_ms`, for
        at most `settle_ms` more, until the cycles have settled (`settled`). A call, fetch or reply
        later than `call_deadline_s` kills the runner (`CallTimedOut`). `plan(warm_ns, reps)`, when
        given, may lower the count the budget allows after seeing the warm-up (timing.planned_reps);
        the count is fixed before the first timed call. With `trim` the runner hands what the cycles
        drew on the device back to the driver when they stop."""
        with self._deadline(call_deadline_s):
            words = self.area.words
            if spin:
                # Cleared before the runner can look: a STOP or GO left from the last cycles would
                # otherwise end this loop at once or start a call nobody timed.
                for slot in (GO, DONE, FETCH, FETCHED, STOP, POSTED):
                    words[slot] = 0
            self.sequence += 1
            self.link.send(
                {
                    "cmd": "cycles",
                    "seq": self.sequence,
                    "model": model,
                    "spin": spin,
                    "seed": seeds(),
                    "output_bytes": output_bytes,
                    "inputs": inputs,
                    "output_start": output_start,
                    "trim": trim,
                }
            )
            self._expect_ready()
            record = CycleRecord()
            call = self._warm_up(record, spin, words, seeds, prepare, warmup_ms, min_warmup, settle_ms)
            estimate_ms = max(sorted(record.warm_ns)[len(record.warm_ns) // 2] / 1e6, 1e-4)
            reps = int(min(max(budget_ms / estimate_ms, min_reps), max_reps))
            if plan is not None:
                reps = max(min_reps, min(reps, plan(record.warm_ns, reps)))
            for index in range(reps):
                call += 1
                seed = seeds()
                record.seeds.append(seed)
                if prepare is not None:
                    prepare(seed)
                record.cycle_ns.append(self._cycle(spin, words, call, seed))
                if fetch(index, reps):
                    record.fetch_ns[index], metas, copy_ns = self._fetch(spin, words, call)
                    if isinstance(copy_ns, int) and copy_ns >= 0:
                        record.copy_ns[index] = copy_ns
                    record.outputs[index] = on_fetch(metas)
            self._stop(spin, words)
            return record

    def _warm_up(
        self,
        record: CycleRecord,
        spin: bool,
        words: Any,
        seeds: Any,
        prepare: Any,
        warmup_ms: float,
        min_warmup: int,
        settle_ms: float,
    ) -> int:
        """Untimed cycles: at least `min_warmup` and `warmup_ms`, then until `warm` or `settle_ms`
        more. Returns the number of calls made."""
        call = 0
        spent_ms = 0.0
        while len(record.warm_ns) < MAX_WARM_CYCLES:
            warmed = len(record.warm_ns) >= min_warmup and spent_ms >= warmup_ms
            if warmed and (spent_ms >= warmup_ms + settle_ms or warm(record.warm_ns)):
                break
            call += 1
            seed = seeds()
            if prepare is not None:
                prepare(seed)
            elapsed = self._cycle(spin, words, call, seed)
            record.warm_ns.append(elapsed)
            spent_ms += elapsed / 1e6
        record.settled = warm(record.warm_ns)
        return call

    @contextmanager
    def _deadline(self, seconds: float | None) -> Iterator[None]:
        self.deadline_s = seconds
        try:
            yield
        finally:
            self.deadline_s = None

    def _expect_ready(self) -> None:
        reply = self.receive()
        if reply.get("ok") is False and reply.get("seq") == self.sequence:
            raise RunnerFailed(reply)
        if reply.get("ready") is not True or reply.get("seq") != self.sequence:
            raise _broken("an unexpected reply to 'cycles'")

    def _cycle(self, spin: bool, words: Any, call: int, seed: int) -> int:
        if not spin:
            started = _perf_ns()
            self.link.send({"go": call, "seed": seed})
            reply = self.receive()
            finished = _perf_ns()
            if reply.get("done") != call:
                self._failed_or_broken(reply, "a reply that is not the call's DONE")
            return finished - started
        words[SEED] = seed
        started = _perf_ns()
        words[GO] = call
        self._spin_until(words, DONE, call, started)
        return _perf_ns() - started

    def _spin_until(self, words: Any, slot: int, value: int, started: int) -> None:
        """Spin until the runner sets `slot` to `value`; past the deadline (from `started`) the
        runner is killed, a dead one is a failure, and a negative value means its reply is on the
        socket."""
        limit_ns = None if self.deadline_s is None else int(self.deadline_s * 1e9)
        spins = 0
        while words[slot] != value:
            spins += 1
            if spins & 0xFFF:
                continue
            if limit_ns is not None and _perf_ns() - started > limit_ns:
                raise self.timed_out(self.deadline_s)
            if spins & 0xFFFF == 0 and (words[slot] < 0 or self.process.poll() is not None):
                if self.process.poll() is not None:
                    raise RunnerFailed({"stage": "runtime", "error": self.death() + " while timed"})
                name = "DONE" if slot == DONE else "FETCHED"
                self._failed_or_broken(self.receive(), f"{name} set to something other than the call")

    def _fetch(self, spin: bool, words: Any, call: int) -> tuple[int, Any, Any]:
        """One fetch, on the judge's clock from its ask to the runner's answer. Spinning, the answer
        is FETCHED and the reply posted beside it (exchange.SharedArea.post): no system call and no
        wake-up inside the clock."""
        started = _perf_ns()
        if spin:
            words[FETCH] = call
            self._spin_until(words, FETCHED, call, started)
            elapsed = _perf_ns() - started
            reply = self._posted_reply(call, started)
        else:
            self.link.send({"fetch": call})
            reply = self.receive()
            elapsed = _perf_ns() - started
        if reply.get("fetched") != call:
            self._failed_or_broken(reply, "a reply that is not the fetched output")
        return elapsed, reply.get("outputs"), reply.get("copy_ns")

    def _posted_reply(self, call: int, started: int) -> dict[str, Any]:
        """The reply to fetch `call` from the control block (or the socket, where the runner said
        so). Read again while it is unreadable or another call's, for at most POSTED_READ_S: a
        machine that orders stores weakly may show FETCHED before the bytes; past it the runner
        broke the protocol."""
        given_up = _perf_ns() + int(POSTED_READ_S * 1e9)
        while True:
            try:
                reply = self.area.posted()
            except ExchangeError as exc:
                if _perf_ns() > given_up:
                    raise _broken(str(exc)) from None
                continue
            if reply is None:
                return self.receive()
            if reply.get("fetched") == call or _perf_ns() > given_up:
                return reply

    def _failed_or_broken(self, reply: dict[str, Any], what: str) -> None:
        if reply.get("ok") is False and reply.get("seq") == self.sequence:
            raise RunnerFailed(reply)
        raise _broken(what)

    def _stop(self, spin: bool, words: Any) -> None:
        if spin:
            words[STOP] = 1
        else:
            self.link.send({"stop": True})
        reply = self.receive()
        if reply.get("stopped") is not True or reply.get("seq") != self.sequence:
            self._failed_or_broken(reply, "an unexpected reply to STOP")

    # -- the end -------------------------------------------------------------------------------------
    def threads(self) -> dict[int, str] | None:
        """The runner's OS threads (id -> name), read by the judge from /proc (native threads
        included); None when it cannot be read."""
        try:
            return procfs.os_threads(self.pid)
        except OSError:
            return None

    def kill(self) -> int:
        """End the runner and everything it started; returns how many other processes it had left
        (0 when it was already ended)."""
        if self.killed:
            return 0
        self.killed = True
        if self.namespace and self.process.init_pid:
            left = max(len(procfs.descendants(self.process.init_pid)) - 1, 0)
        else:
            left = len(procfs.descendants(self.pid))
        self.process.kill()
        try:
            self.link.close()
        finally:
            self.area.close()
        return left
