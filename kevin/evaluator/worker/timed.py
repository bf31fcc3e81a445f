"""Timing, by the judge's clock: cycles of the runner measured from outside it.

    calibrate   while the runner is still clean (no candidate loaded), time cycles that do
                everything but the call: refill the inputs from a fresh seed (GPU: on the device,
                in the runner; CPU: written into shared memory by the judge before the cycle
                starts), flush the L2, synchronize the device, signal back. Their median is the
                cycle's own overhead O, and fetches of an output-sized buffer give the clean fetch
                time: kept for comparison only (minutes before the timing, beside other work).
    bracket     O and the clean fetch time as taken off: the same cycles run in a trusted runner
                (one that never loaded a candidate; for the baseline, its own runner) just before
                and just after the timed calls, inside the same exclusive section, so they are
                measured under the host's and the device's conditions of the moment, not those of
                the clean calibration seconds or minutes earlier (`time_bracketed`).
    cores       on the GPU back end both sides spin (the judge for DONE, the runner for the next
                GO); while a timing and its bracket run, the judge's thread and the runners' are
                pinned to two cores of their own (`seated_for_timing`), since two spinners on one core
                make every cycle two scheduler slices long; a host with the cores keeps each
                device's pair from all other evaluator work (kevin.evaluator.cores). On the CPU
                back end both sides sleep on the socket, and they are pinned to one core together
                (`cores.cpu_timing_core`), so that each hand-off stays on it.
    time_model  the same cycles with the call; call i's time is (its cycle on the judge's clock) - O.
                The reported median is the median of the means of blocks of consecutive calls, so
                work pushed from one call into the next (a runner that answers DONE before the
                device is idle) is still counted; single slow samples (a descheduled process) do
                not move it. A few calls, chosen here after they are done, are fetched: their
                outputs are checked against the reference on the same seed (timed_output_mismatch),
                and a fetch much slower than the clean one means the output was computed only when
                asked for (`deferred_work`: kevin.evaluator.worker.fetchcheck).

The runner learns each call's seed only when the call starts, so it cannot compute ahead. What is
timed includes everything the runner does for a call, so work hidden in its refill or signalling is
timed too; what the judge subtracts (O) was measured before any candidate code existed.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness).
"""

from __future__ import annotations

import contextlib
import os
import statistics
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kevin.evaluator import cores, probes, procfs, timing
from kevin.evaluator.worker import exchange, fetchcheck
from kevin.evaluator.worker.exchange import output_bytes, read_outputs
from kevin.evaluator.worker.handle import (
    CALL_FLOOR_S,
    CallTimedOut,
    RunnerFailed,
    RunnerHandle,
    call_deadline_s,
)
from kevin.evaluator.worker.support import Failure

CALIBRATION_FETCHES = 5
CALIBRATION_BUDGET_MS = 80.0
"""Judge-clock time spent on overhead cycles: a few percent of a candidate's timing budget."""
TIMED_FETCHES = 3
BRACKET_BUDGET_MS = 40.0
"""Judge-clock time of each side of a timing's bracket (`time_bracketed`), after its warm-up."""
BRACKET_FETCHES = 3
CANDIDATE_ATTEMPTS = 2
"""Timings of a candidate, in its exclusive section, before one under its inputs' bandwidth floor
stands (and `bound_check` flags it `impossible_speedup`): the reference's rule
(baseline.REFERENCE_ATTEMPTS). s37's H100 fetch A/B timed an honest softmax at 1e-6 ms in one of its
four evaluations. A candidate that beats the floor by what it does beats it again, and is flagged."""
BLOCK_CALLS = 4
"""Calls per block: the statistic is the median of block means."""


class TimingStage:
    def calibrate(self, runner: RunnerHandle, who: str) -> dict[str, Any]:
        """The cycle overhead and the fetch time of an output-sized buffer, in a clean runner: a
        figure to compare the bracket's with (`checks.overhead_ms`), never taken off a timing, so
        it runs beside other workers' shared device work rather than holding the device alone
        (0.6 s of exclusive time an evaluation on the H200). It also runs the runner's cycle code
        once before the judge lists its threads, so threads that code starts are not new later."""
        with self.admitted_moment("calibrate"), kept_off([runner.process.pid], self.spin_cores()):
            expected = self.expected_outputs(self.trial_seed(0), None)
            self.output_shapes = [self.torch.empty(tuple(o.shape), device="meta") for o in expected]
            nbytes = output_bytes(expected)
            del expected
            budget_ms = min(CALIBRATION_BUDGET_MS, self.timing_config()["budget_ms"] / 5)
            record = self.overhead_cycles(
                runner, who, nbytes, budget_ms, fetches=CALIBRATION_FETCHES, trim=True
            )
        self.checks.setdefault("settled", {})["calibrate " + who] = record.settled
        return overhead_from([record], nbytes)

    def spin_cores(self) -> tuple[int, int] | None:
        """The judge's and the runners' cores while this device's timings run: on the GPU back end
        two (`timing_cores`: both sides spin); on the CPU back end, whose waits on the socket sleep,
        the same core twice (kevin.evaluator.cores.cpu_timing_core). None: left to the scheduler."""
        ordinal = int(self.job.get("device_ordinal", 0))
        if not self.is_cuda:
            core = cores.cpu_timing_core(ordinal)
            return None if core is None else (core, core)
        return timing_cores(ordinal)

    def overhead_cycles(
        self, runner: RunnerHandle, who: str, nbytes: int, budget_ms: float, fetches: int, trim: bool = False
    ) -> Any:
        """Cycles without a call (refill, flush, synchronize, signal) in `runner`, with `fetches` of an
        output-sized buffer spread over them. Only a runner whose code is trusted may be asked: one
        that never loaded a candidate. `trim`: the runner gives its draws' device memory back after."""
        try:
            return runner.run_cycles(
                model=False,
                spin=self.is_cuda,
                seeds=lambda: self.rng.getrandbits(62),
                warmup_ms=20.0,
                min_warmup=3,
                budget_ms=budget_ms,
                min_reps=20,
                max_reps=100,
                output_bytes=nbytes,
                fetch=lambda i, n: i % max(n // fetches, 1) == 0,
                on_fetch=lambda metas: None,
                # No call runs, so no fresh inputs are needed (drawing them is the CPU's cost).
                **{**self.shared_inputs(runner), "prepare": None},
                trim=trim,
            )
        except RunnerFailed as failed:
            raise Failure(
                "runtime",
                f"kevin's runner failed to calibrate ({who}): " + failed.error,
                blame="infrastructure",
            ) from None

    def time_bracketed(
        self, runner: RunnerHandle, control: RunnerHandle, overhead: dict[str, Any], who: str
    ) -> tuple[Any, dict[str, Any]]:
        """`time_model` between two short runs of overhead cycles in `control`, and the overhead
        those give: the one taken off the timed calls. The runner's own clean calibration is seconds
        or minutes older (compile, trials, the wait for the device); a host whose load changed in
        between moved it by more than a short kernel takes (on the H200 under a busy batch, honest
        7 us kernels came out at 0 and were flagged `impossible_speedup`, and slower fetches read as
        `deferred_work`). `control` must be trusted: a runner that never loaded a candidate, or the
        baseline's own (it loaded only the reference)."""
        budget_ms = min(BRACKET_BUDGET_MS, self.timing_config()["budget_ms"] / 10)
        nbytes = overhead["output_bytes"]
        before = self.overhead_cycles(control, "bracket", nbytes, budget_ms, fetches=BRACKET_FETCHES)
        # The count of timed calls is planned against the overhead of this moment (the baseline has
        # no other: its runner was never calibrated clean).
        record = self.time_model(
            runner, {**overhead, "cycle_ms": overhead_from([before], nbytes)["cycle_ms"]}, who
        )
        after = self.overhead_cycles(control, "bracket", nbytes, budget_ms, fetches=BRACKET_FETCHES)
        self.checks.setdefault("settled", {})["bracket " + who] = before.settled and after.settled
        # Each side's median, attempt by attempt: a bracket slower before the calls than after them
        # (a clock still rising?) takes too much off short calls (session 30: references at ~0).
        sides = [record_wall_median_ms(before), record_wall_median_ms(after)]
        self.checks.setdefault("bracket_sides_ms", {}).setdefault(who, []).append([round(x, 5) for x in sides])
        clean_fetch_ms, clean_copy_ms = overhead.get("fetch_ms"), overhead.get("copy_ms")
        overhead = overhead_from([before, after], nbytes)
        overhead["cycles_ms"] = [ns / 1e6 for ns in before.cycle_ns + after.cycle_ns]
        overhead["sides_ms"] = sides
        if clean_fetch_ms:  # the timed runner's own, from its clean calibration (`timing_stats`)
            overhead["own_fetch_ms"] = clean_fetch_ms
            overhead["own_copy_ms"] = clean_copy_ms
        return record, overhead

    def shared_inputs(self, runner: RunnerHandle) -> dict[str, Any]:
        """CPU back end: the inputs live in the shared area and this process writes each call's
        fresh draw there before the call starts, so drawing them (often longer than the call on a
        CPU) is outside the clock and not in the runner's hands. On the GPU the runner refills
        them on the device inside the clock (a copy through host memory would cost more than most
        kernels), and the overhead O takes that back out."""
        if self.is_cuda:
            return {}
        described, views, output_start = exchange.shared_inputs(
            runner.area, self.draw(self.rng.getrandbits(62))
        )
        torch = self.torch

        def prepare(seed: int) -> None:
            for view, value in zip(views, self.draw(seed), strict=True):
                if isinstance(view, torch.Tensor):
                    view.copy_(value)

        return {"prepare": prepare, "inputs": described, "output_start": output_start}

    def timing_config(self) -> dict[str, Any]:
        return dict(self.job["timing"])

    def time_model(self, runner: RunnerHandle, overhead: dict[str, Any], who: str = "candidate") -> Any:
        config = self.timing_config()
        chosen: set[int] = set()

        def fetch(index: int, reps: int) -> bool:
            if not chosen:  # chosen once the count is known: a random few, and the last
                chosen.update(self.rng.sample(range(reps), min(TIMED_FETCHES - 1, reps)))
                chosen.add(reps - 1)
            return index in chosen

        try:
            record = runner.run_cycles(
                model=True,
                spin=self.is_cuda,
                seeds=lambda: self.rng.getrandbits(62),
                warmup_ms=config["warmup_ms"],
                min_warmup=config["min_warmup"],
                budget_ms=config["budget_ms"],
                min_reps=config["min_reps"],
                max_reps=config["max_reps"],
                output_bytes=overhead["output_bytes"],
                fetch=fetch,
                on_fetch=lambda metas: read_outputs(runner.area, metas, self.output_shapes, self.device),
                # The candidate's runner (warm after its trials) gets the per-call deadline; the
                # baseline's reference is ours and never timed out here.
                call_deadline_s=call_deadline_s(self.reference_call_s) if who == "candidate" else None,
                plan=lambda warm_ns, reps: timing.planned_reps(
                    warm_ns,
                    reps,
                    config["min_reps"],
                    config.get("precision", 0.0),  # a job made without it times the whole budget
                    overhead.get("cycle_ms", 0.0),
                    BLOCK_CALLS,
                ),
                **self.shared_inputs(runner),
            )
        except RunnerFailed as failed:
            raise failed.failure("runtime", during=self.stage_name) from None
        self.checks.setdefault("settled", {})["timing " + who] = record.settled
        return record

    def time_steadily(
        self,
        runner: RunnerHandle,
        overhead: dict[str, Any],
        who: str = "candidate",
        control: RunnerHandle | None = None,
    ) -> tuple[Any, bool, dict[str, Any]]:
        """`time_model` (bracketed by overhead cycles in `control` when given: `time_bracketed`),
        again while its timing or its bracket is dispersed (kevin.evaluator.timing.dispersed), up
        to TIMING_ATTEMPTS. Returns the steadiest attempt's record, whether it is still dispersed,
        and the overhead to take off its calls (the attempt's bracket, else `overhead`). A bracket
        still dispersed is a Failure blamed on the infrastructure: its overhead, taken off, would
        hand a candidate the host's disturbance as speed."""
        attempts: list[tuple[float, Any, bool, dict[str, Any], bool]] = []
        clocked = [runner] if control is None or control is runner else [runner, control]
        pids = [r.process.pid for r in clocked]
        # Faults and context switches of each side over the attempts, for reading a slow fetch or
        # cycle afterwards (s33: honest small kernels flagged deferred_work on a cold, busy host).
        before = [procfs.counters(pid) for pid in pids]
        pair = self.spin_cores()
        seated = seated_for_timing(pids, pair, self.checks)
        with raised_priority([0, *pids], self.checks), seated:
            for _ in range(timing.TIMING_ATTEMPTS):
                if control is None:
                    record, used = self.time_model(runner, overhead, who), overhead
                else:
                    record, used = self.time_bracketed(runner, control, overhead, who)
                stats = timing.summarize_cycles(
                    [c / 1e6 for c in record.cycle_ns], used["cycle_ms"], BLOCK_CALLS
                )
                bracket = used.pop("cycles_ms", None)
                sides = used.pop("sides_ms", None)
                spread = max(timing.dispersion(stats), timing.cycles_dispersion(bracket) if bracket else 0.0)
                signalling = "spin" if self.is_cuda else "block"
                unsteady = bool(bracket) and (
                    timing.cycles_dispersed(bracket, stats.wall_median_ms, signalling)
                    or timing.overhead_exceeds_cycles(used["cycle_ms"], stats.wall_median_ms, signalling)
                )
                noise = timing.noise(stats, sides)
                noisy = self.is_cuda and timing.noisy(noise)
                attempts.append((spread, record, timing.dispersed(stats), used, unsteady, noisy))
                self.checks.setdefault("timing_noise", {}).setdefault(who, []).append(
                    {k: round(v, 4) for k, v in noise.items()}
                )
                if not (attempts[-1][2] or unsteady or noisy):
                    break
        counted = {
            side: procfs.counted_since(counts, pid)
            for side, counts, pid in zip(("timed", "control"), before, pids, strict=False)
        }
        self.checks.setdefault("runner_counters", {})[who] = {k: v for k, v in counted.items() if v is not None}
        if len(attempts) > 1:
            self.checks.setdefault("timing_attempts", {})[who] = [round(a[0], 2) for a in attempts]
        # The steadiest by the rules in order (a bracket to refuse, a dispersed timing, a noisy one),
        # then by spread.
        _, record, still, used, unsteady, _ = min(attempts, key=lambda a: (a[4], a[2], a[5], a[0]))
        if control is not None:
            seen = {"bracket": round(used["cycle_ms"], 4)}
            if "cycle_ms" in overhead:  # the runner's own clean calibration, for comparison
                seen["clean"] = round(overhead["cycle_ms"], 4)
            self.checks.setdefault("overhead_ms", {})[who] = seen
        if unsteady:
            raise Failure(
                "runtime",
                f"the cycle overhead around the {who}'s timing stayed dispersed or above the timed "
                f"cycles over {timing.TIMING_ATTEMPTS} attempts (median {used['cycle_ms']:.3g} ms against "
                f"timed cycles of {record_wall_median_ms(record):.3g} ms): the host or device was busy "
                "elsewhere; evaluate again when it is quieter",
                blame="infrastructure",
            )
        return record, still, used

    def timing_stats(self, record: Any, overhead: dict[str, Any], flag: bool = True) -> dict[str, Any]:
        stats = timing.summarize_cycles([c / 1e6 for c in record.cycle_ns], overhead["cycle_ms"], BLOCK_CALLS)
        if flag and record.fetch_ns:
            checks, deferred = fetchcheck.fetch_checks(
                record.fetch_ns, record.copy_ns, overhead, stats.median_ms, "spin" if self.is_cuda else "block",
            )
            self.checks.update(checks)
            if deferred:
                self.flags.append("deferred_work")
        return stats.to_dict()

    def time_candidate(self, runner: RunnerHandle, control: RunnerHandle | None) -> tuple[Any, dict[str, Any]]:
        """`time_steadily` against the runner's clean calibration, once more when the calls came out
        under the inputs' bandwidth floor (CANDIDATE_ATTEMPTS; `checks.candidate_retimed` keeps each
        timing set aside). Returns the record and the overhead to take off its calls."""
        clean, floor_ms = self.overhead, self.bandwidth_floor_ms()
        for attempt in range(1, CANDIDATE_ATTEMPTS + 1):
            record, _, used = self.time_steadily(runner, dict(clean), control=control)
            if floor_ms is None or attempt == CANDIDATE_ATTEMPTS:
                break
            stats = timing.summarize_cycles([c / 1e6 for c in record.cycle_ns], used["cycle_ms"], BLOCK_CALLS)
            if not probes.impossible(stats.median_ms, floor_ms):
                break
            self.checks.setdefault("candidate_retimed", []).append({
                "median_ms": stats.median_ms,
                "wall_median_ms": round(stats.wall_median_ms, 6),
                "overhead_ms": round(used["cycle_ms"], 6),
            })  # fmt: skip
        return record, used

    def bandwidth_floor_ms(self) -> float | None:
        """The least time reading the inputs once can take on this device (GPU back ends; None else)."""
        if not self.is_cuda or not self.input_bytes:
            return None
        return probes.bandwidth_floor_for_bytes(self.input_bytes, self.torch.cuda.get_device_name())

    def bound_check(self, stats: dict[str, Any]) -> None:
        if not self.is_cuda or not self.input_bytes:
            return
        floor_ms = self.checks["bandwidth_floor_ms"] = self.bandwidth_floor_ms()
        if probes.impossible(stats["median_ms"], floor_ms):
            self.flags.append("impossible_speedup")

    def after_candidate(self, runner: RunnerHandle) -> None:
        """What the candidate did to its own process, seen from here (threads) and reported by it."""
        before, after = self.threads_before, runner.threads()
        if before is not None and after is not None:
            self.checks["runner_threads"] = record = thread_changes(before, after)
            if record["started"]:
                self.flags.append("extra_threads")
        try:
            state = runner.request("state", deadline_s=CALL_FLOOR_S)
        except CallTimedOut as timed_out:
            raise timed_out.failure(during=self.stage_name) from None
        except RunnerFailed:
            return
        before, after = self.state_before.get("flags"), state.get("flags")
        if after != before:
            self.flags.append("global_state_changed")
            self.checks["global_state"] = state_changes(before, after)


def state_changes(before: Any, after: Any) -> dict[str, list[str]]:
    """The settings that differ, each as [before, after] (the runner's reply is data: at most 8
    keys, every value cut to 60 characters)."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return {"(reply)": [str(before)[:60], str(after)[:60]]}
    keys = sorted((k for k in {*before, *after} if before.get(k) != after.get(k)), key=str)[:8]
    return {str(k)[:60]: [str(before.get(k))[:60], str(after.get(k))[:60]] for k in keys}


def thread_changes(before: dict[int, str], after: dict[int, str]) -> dict[str, Any]:
    """The runner's threads that started after the judge first listed them (before the candidate
    loaded) and those that ended, by name; `started`: the new ones not matched by an ended one of the
    same name (a profiling session may replace a tool thread of its own). Compared by thread id,
    not by count: a runner thread that ended (say, a pool's idle timeout) must not hide one the
    candidate started."""
    new = sorted(name for tid, name in after.items() if tid not in before)
    gone = sorted(name for tid, name in before.items() if tid not in after)
    started = sorted((Counter(new) - Counter(gone)).elements())
    return {"before": len(before), "after": len(after), "new": new, "gone": gone, "started": started}


def record_wall_median_ms(record: Any) -> float:
    return statistics.median(record.cycle_ns) / 1e6 if record.cycle_ns else 0.0


def overhead_from(records: list[Any], nbytes: int) -> dict[str, Any]:
    """The overhead of cycles without a call (their median) and the clean fetch time (the median
    fetch) over `records` of `overhead_cycles`."""
    cycles = [ns for record in records for ns in record.cycle_ns]
    fetches = sorted(ns for record in records for ns in record.fetch_ns.values())
    copies = [ns for record in records for ns in record.copy_ns.values()]
    return {
        "cycle_ms": statistics.median(cycles) / 1e6,
        "fetch_ms": statistics.median(fetches) / 1e6 if fetches else 0.0,
        "copy_ms": statistics.median(copies) / 1e6 if copies else None,
        "fetch_max_ms": fetches[-1] / 1e6 if fetches else 0.0,
        "output_bytes": nbytes,
    }


TIMING_NICENESS = -5
"""The judge's and its runners' clocked threads while they time: above the builds (nice 10) and
everything else at 0, so a busy host delays their signalling by less than a time slice. Between
sessions the kernel weighs autogroups, not processes, so the judge's session (its runners share it)
gets the same niceness for the timing (kevin.evaluator.cores.nicer_session)."""


@contextmanager
def raised_priority(pids: list[int], checks: dict[str, Any]) -> Iterator[None]:
    """Run the block with the main threads of `pids` (0: this one), and this process's session, at
    TIMING_NICENESS, then put them back. Raising a priority needs CAP_SYS_NICE; without it the
    timing runs as it is and the checks say so (`timing_priority`, `timing_session`)."""
    before: dict[int, int] = {}
    try:
        for pid in pids:
            previous = os.getpriority(os.PRIO_PROCESS, pid)
            if previous > TIMING_NICENESS:
                os.setpriority(os.PRIO_PROCESS, pid, TIMING_NICENESS)
                before[pid] = previous
        checks["timing_priority"] = TIMING_NICENESS
    except OSError as exc:
        checks["timing_priority"] = f"unchanged ({exc.strerror})"
    session = cores.session_niceness(os.getpid())
    raised = session is not None and session > TIMING_NICENESS
    if raised:
        checks["timing_session"] = outcome = cores.nicer_session(os.getpid(), TIMING_NICENESS)
        raised = outcome == "set"
    try:
        yield
    finally:
        for pid, previous in before.items():
            with contextlib.suppress(OSError):  # a runner that has died
                os.setpriority(os.PRIO_PROCESS, pid, previous)
        if raised:
            cores.nicer_session(os.getpid(), session)


def timing_cores(ordinal: int) -> tuple[int, int] | None:
    """The two cores a timing on device `ordinal` spins on, the judge's and its runners': the pair
    kept for it on this host (kevin.evaluator.cores), else one picked from this thread's cores from
    the top down, so timings on several GPUs of one host keep apart. None with fewer than two."""
    return cores.current().timing_pair(ordinal)


@contextmanager
def seated_for_timing(
    runner_pids: list[int], pair: tuple[int, int] | None, checks: dict[str, Any]
) -> Iterator[None]:
    """Run the block with this thread on `pair[0]` and the main threads of `runner_pids` on
    `pair[1]`, then put their affinities back. On the GPU back end the judge spins waiting for a
    runner's DONE while the runner spins waiting for the next GO: two such spinners that the
    scheduler puts on one core take turns a time slice at a time, and every cycle then lasts two
    slices (8.0 ms on the H200 and on a 2-core CI machine, for cycles of 0.02-0.5 ms; the H200
    learning run of session 23 timed 18 candidates at 8 or 16 ms, and brackets slowed that way
    timed others at 0). Only one runner spins at a time, so the runners share a core. The CPU back
    end passes one core twice (kevin.evaluator.cores.cpu_timing_core: its waits sleep). Without a
    pair (fewer than two cores, or `KEVIN_CPU_TIMING_SEAT=free`) or the right to set them, the timing
    runs as it is and the check says so; `kept` in the check says whether the pair was kept from all
    other work (kevin.evaluator.cores)."""
    if pair is None:
        checks["timing_cores"] = "unpinned"
        yield
        return
    judge_core, runner_core = pair
    seats = {pid: runner_core for pid in runner_pids} | {0: judge_core}
    saved: dict[int, set[int]] = {}
    try:
        saved = {pid: os.sched_getaffinity(pid) for pid in seats}  # all read before any is set
        for pid, core in seats.items():
            os.sched_setaffinity(pid, {core})
        checks["timing_cores"] = {"judge": judge_core, "runners": runner_core, "kept": cores.current().kept}
    except OSError as exc:
        _restore_affinity(saved)
        saved = {}
        checks["timing_cores"] = f"unpinned ({exc.strerror})"
    try:
        yield
    finally:
        _restore_affinity(saved)


@contextmanager
def kept_off(runner_pids: list[int], pair: tuple[int, int] | None) -> Iterator[None]:
    """Run the block with this thread and the main threads of `runner_pids` on any allowed core but
    `pair` (a device's timing cores), then put their affinities back: a clean calibration spins
    too, beside other workers' device work, and must not land on the cores a timing is pinned to.
    Nothing changes with fewer than two other cores left. Where the host keeps each device's pair
    (kevin.evaluator.cores) a judge and its runners already run off every pair but while timed."""
    allowed = os.sched_getaffinity(0)
    others = allowed - set(pair or ())
    if pair is None or len(others) < 2:
        yield
        return
    saved: dict[int, set[int]] = {}
    try:
        saved = {pid: os.sched_getaffinity(pid) for pid in (*runner_pids, 0)}
        for pid in saved:
            os.sched_setaffinity(pid, others)
    except OSError:
        _restore_affinity(saved)
        saved = {}
    try:
        yield
    finally:
        _restore_affinity(saved)


def _restore_affinity(saved: dict[int, set[int]]) -> None:
    for pid, mask in saved.items():
        with contextlib.suppress(OSError):  # a runner that has died
            os.sched_setaffinity(pid, mask)
