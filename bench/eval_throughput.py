"""Evaluation throughput (issue #5 item 4): a plain load_inline harness against kevin's service.

One mixed batch of our own KernelBench level 1-2 candidates (bench/candidates/throughput/: correct,
correct-but-slow, wrong results, compile errors; manifest.json says which is which) evaluated in one
run on the GPU machine by

  (a) plain:  a sequential harness with no kevin in it: for each candidate, a fresh Python process
              imports it (its load_inline builds cold, in a fresh TORCH_EXTENSIONS_DIR), then, holding
              kevin's device lock so its GPU work never overlaps kevin's, builds Model and ModelNew
              from seed 42 on the GPU, checks 5 trials of get_inputs() (allclose at kevin's fp32
              tolerance, atol = rtol = 1e-4, so both harnesses judge by one criterion and a
              disagreement points at the build path or the service; KernelBench's own 1e-2 is
              recorded beside it) and times both with CUDA events (warm-up, then calls until the
              timing budget, 10 to 100). It runs in a background thread, in a fixed order that
              interleaves the kinds, until `--a-limit` candidates or the deadline: one plain build
              takes about a minute, so all 64+ do not fit in one device command.
  (b) kevin:  kevin.evaluator.service.EvaluationService over every candidate, `--jobs` at a time.

Passes: `cold` (fresh build and baseline caches under --cache-dir, both harnesses) and `cached`
(kevin only, the same batch again: builds come from kevin's build cache, so this measures the
per-candidate cost without compilation). Run them in one invocation (`--passes cold,cached`) or
one per call with the same --cache-dir.

Reported per pass: candidates/hour of each harness over its own wall time, build-time percentiles
(kevin: cold and cache-hit builds apart), the GPU busy share (nvidia-smi utilization sampled every
0.2 s, else torch.cuda.utilization, else none), the time each harness held the GPU, and each
candidate's verdict (compile_error / wrong / correct, plus flagged / rejected / timeout / error where
kevin says so) under (a) and (b) with whether they agree, over the candidates both finished.
Output: throughput_<pass>.json per pass and eval_throughput.md (every pass found in --out) under
--out; a short summary is printed last.

Usage on the GPU machine (KernelBench files from --kernelbench, $KEVIN_KERNELBENCH_DIR,
../shared/kernelbench_data or .kb/, in that order; `--list-problems` prints the files needed):
    PYTHONPATH=. python bench/eval_throughput.py --out bench/results/h200 --passes cold
    PYTHONPATH=. python bench/eval_throughput.py --out bench/results/h200 --passes cached
Measuring the hangs' cost (two device calls, then merge here):
    PYTHONPATH=. python bench/eval_throughput.py --out OUT --passes cold --harness kevin
    PYTHONPATH=. python bench/eval_throughput.py --out OUT --passes cold --harness kevin --hangs
On a CPU: `--dry-run` checks the manifest (hang candidates included, whatever --hangs says), the
problem files and the static gate, and runs nothing;
`--report-only` rewrites the markdown from the pass JSONs found under --out (passes run in separate
device calls, each writing to its own folder, can be copied into one and merged there); a
hand-written eval_throughput_notes.md there is kept at the top of the report.

Hangs (issue #15: "add 5% hanging candidates to the mix: the rate may drop by no more than 10%"):
`--hangs` adds the manifest's hang kind (candidates whose first call never returns: a kernel spinning
on a flag, a host loop in forward, a deadlock between blocks, a host waiting for a kernel that waits
for it; expected verdict `timeout`, what kevin's per-call deadline gives: the runner killed, stage
timeout, blamed on the candidate) to kevin's pass, 4 of 70 (5.7%), spread evenly through its order.
Without the flag the batch is the 66 every earlier pass measured. Harness (a) never runs them (no
per-call deadline: one would stall it until the device call's limit); the report says so. Such a
pass is written to throughput_<pass>_hangs.json and reports each hang's verdict, stage, worker
seconds and device-held seconds (stage_seconds), and candidates/hour over its wall for the whole
batch and for the non-hang candidates alone. The drop is read two ways:
  measured   the same pass without --hangs (same machine, same flags) in the same --out: the change
             of the whole batch's candidates/hour (hangs counted, each is a candidate with a
             verdict), the criterion, and of the non-hang candidates' alone. Two cold passes do not
             fit in one 600 s device call: run them as two calls and merge with --report-only.
  estimated  from the --hangs pass alone: its non-hang candidates over its wall less the hangs'
             device-held seconds (a hang holds the device shared for its whole call deadline, so no
             timing starts meanwhile). Exact when the pass is bound by the device lock (the cold
             pass is: ~180 of ~235 s exclusive on the H200) and no two hangs held it at once; it
             misses what a spinning kernel costs the work beside it and its teardown after the kill.

What this does not measure: the plain harness shares the CPU with kevin's builds (its build times
are contended, as a real sequential harness on an idle machine would not be). (a) checks only
get_inputs() draws at kevin's elementwise tolerance; kevin adds inputs from other distributions and
a relative-L2 gate, so a kernel wrong only there reads correct under (a): reported as a
disagreement, not hidden. The report's "(a) at 1e-2" column is (a)'s verdict at KernelBench's
tolerance, which passes some wrong kernels (an off-by-one in a long reduction).

Why one module of ~630 lines: the kevin pass, the GPU sampler and the CLI share one run's state and
report; harness (a) and the report rendering are already modules of their own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plain_harness import PlainRunner, judge_trial, plain_verdict  # noqa: E402, F401  (re-exported for the tests)
from throughput_report import (  # noqa: E402  (bench/ is on the path only from here on)
    HANG,
    _count,
    agreement,
    hang_comparisons,
    hang_peer,
    hang_summary,
    load_manifest,
    markdown,
    summarize_kevin,
    summarize_plain,
    summary_text,
    verdict_table,
    with_full_plain,
)

KINDS = ("correct", "compile_error", "wrong", "slow")
VERDICTS = ("correct", "wrong", "compile_error")
CACHE_MARKER = ".eval_throughput"
NOTES_FILE = "eval_throughput_notes.md"


# -- the candidate set and the problems --------------------------------------------------------------


def kernelbench_dir(explicit: str | None = None, environ: dict[str, str] | None = None) -> Path:
    """--kernelbench, else $KEVIN_KERNELBENCH_DIR, else ../shared/kernelbench_data when present, else .kb."""
    environ = os.environ if environ is None else environ
    if explicit:
        return Path(explicit)
    if environ.get("KEVIN_KERNELBENCH_DIR"):
        return Path(environ["KEVIN_KERNELBENCH_DIR"])
    shared = REPO.parent / "shared" / "kernelbench_data"
    return shared if shared.is_dir() else REPO / ".kb"


def problems_needed(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({row["problem"] for row in rows})


def kevin_batch(rows: list[dict[str, Any]], hangs: bool) -> list[dict[str, Any]]:
    """kevin's order: the non-hang candidates in manifest order; with `hangs`, the hang candidates
    spread evenly through it (the i-th of h after about (i + 1) / (h + 1) of the others), so that
    they overlap every part of the pass rather than its start or its end."""
    others = [r for r in rows if r["kind"] != HANG]
    order = list(others)
    extra = [r for r in rows if r["kind"] == HANG] if hangs else []
    for i, row in enumerate(extra):
        order.insert(round((i + 1) * len(others) / (len(extra) + 1)) + i, row)
    return order


def interleaved(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plain harness's order: one of each kind in turn (correct, compile_error, wrong, slow), and
    within a kind the problems in turn, level 1 and level 2 alternating, so any prefix covers every
    kind and spreads over problems. Kinds outside KINDS (hang) are never in it."""
    queues = {kind: _spread_problems([r for r in rows if r["kind"] == kind]) for kind in KINDS}
    order: list[dict[str, Any]] = []
    while any(queues.values()):
        for kind in KINDS:
            if queues[kind]:
                order.append(queues[kind].pop(0))
    return order


def _spread_problems(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_problem: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_problem.setdefault(row["problem_id"], []).append(row)
    levels = [[p for p in by_problem if p.startswith(prefix)] for prefix in ("L1", "L2")]
    others = [p for p in by_problem if not p.startswith(("L1", "L2"))]
    problems = [p for pair in zip(*levels) for p in pair]
    longer = max(levels, key=len)
    problems += longer[len(min(levels, key=len)) :] + others
    order = []
    while any(by_problem.values()):
        for problem in problems:
            if by_problem[problem]:
                order.append(by_problem[problem].pop(0))
    return order


# -- verdicts ------------------------------------------------------------------------------------------


def kevin_verdict(result: dict[str, Any]) -> str:
    """An EvalResult (as a dict) in the benchmark's words."""
    from kevin.evaluator.result import EvalResult

    if result.get("blame") == "infrastructure":
        return "error"
    stage = result.get("stage")
    if stage == "ok":
        if result.get("correct"):
            return "flagged" if EvalResult.from_dict(result).blocking_flags else "correct"
        return "wrong"
    if stage == "compile":
        return "compile_error"
    if stage in ("runtime", "correctness"):
        return "wrong"
    return {"static_check": "rejected", "timeout": "timeout", "format": "rejected"}.get(stage, "error")


# -- (b) kevin's service ----------------------------------------------------------------------------------


def run_kevin(
    rows, kb, config, jobs, deadline, submit_reserve_s, grace_s, journal: Path | None = None
) -> tuple[list[dict], float]:
    """Every candidate through EvaluationService; returns (rows, wall seconds to the last result).

    Each result is printed as it comes, with its stage and error's first line when it is not correct,
    and appended to `journal` (JSON lines) if given: a call cut at its limit still says what failed and
    why (s45: an A/A pass killed at its limit wrote no report, and its log said only "error"). An
    interrupt (the call's SIGINT) ends the wait; the rows finished so far are returned."""
    from kevin.evaluator.service import EvaluationService
    from kevin.tasks import Task

    service = EvaluationService(config, max_in_flight=jobs)
    service.prepare()  # the shim and the symbol check's reference start building now, as in training
    futures: dict[Future, dict[str, Any]] = {}
    lock = threading.Lock()
    started = time.monotonic()

    def feed() -> None:
        for row in rows:
            if time.monotonic() > deadline - submit_reserve_s:
                return
            problem = kb / row["problem"]
            task = Task.from_source(
                problem.read_text(), id=row["problem_id"], name=problem.stem, origin=str(problem)
            )
            future = service.submit(task, Path(row["path"]).read_text())  # blocks while the queue is full
            with lock:
                futures[future] = row

    feeder = threading.Thread(target=feed, name="kevin-feeder", daemon=True)
    feeder.start()
    results: dict[str, dict[str, Any]] = {}
    last = started
    if journal is not None:  # this pass's own: an earlier run's rows never mix in
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.unlink(missing_ok=True)
    try:
        while True:
            with lock:
                pending = [f for f in futures if futures[f]["id"] not in results]
            if not pending and not feeder.is_alive():
                break
            if time.monotonic() > deadline + grace_s:
                break
            if time.monotonic() > deadline:
                for future in pending:
                    future.cancel()  # not started yet: never will be
            for future in [f for f in pending if f.done()]:
                row = futures[future]
                if future.cancelled():
                    results[row["id"]] = {"id": row["id"], "verdict": "not_run", "stage": "cancelled"}
                    continue
                data = future.result().to_dict()
                data.pop("log", None)
                results[row["id"]] = {"id": row["id"], "verdict": kevin_verdict(data), **data}
                last = time.monotonic()
                print(result_line(results[row["id"]]), flush=True)
                if journal is not None:
                    with journal.open("a") as out:
                        out.write(json.dumps(results[row["id"]], default=str) + "\n")
            time.sleep(0.2)
    except KeyboardInterrupt:
        print(f"[kevin] interrupted: {len(results)} of {len(rows)} finished, the rest not_run", flush=True)
    if all(f.done() for f in futures):
        service.close()
    return [results.get(row["id"], {"id": row["id"], "verdict": "not_run"}) for row in rows], last - started


def result_line(row: dict[str, Any]) -> str:
    """One finished candidate for the log: verdict and seconds, and for any verdict but correct the
    stage, the blame and the error's first line (what a cut call's log must still say)."""
    line = f"[kevin] {row['id']}: {row['verdict']} ({(row.get('stage_seconds') or {}).get('total')} s)"
    if row["verdict"] == "correct":
        return line
    error = first_line(row.get("error"), 200)
    flags = ",".join(row.get("flags") or [])
    return f"{line} stage={row.get('stage')} blame={row.get('blame')}" + (
        f" flags={flags}" if flags else ""
    ) + (f": {error}" if error else "")


def first_line(text: str | None, width: int = 160) -> str:
    """The first non-blank line of an error, cut to `width`."""
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")[:width]


# -- GPU busy share ----------------------------------------------------------------------------------------


class GpuSampler:
    """GPU utilization every `period_s`: one long-lived `nvidia-smi -lms`, else torch.cuda.utilization
    polled in a thread, else nothing (source None)."""

    def __init__(self, device_index: int = 0, period_s: float = 0.2):
        self.device_index, self.period_s = device_index, period_s
        self.samples: list[tuple[float, float]] = []
        self.source: str | None = None
        self._process: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> GpuSampler:
        if shutil.which("nvidia-smi"):
            command = [
                "nvidia-smi",
                "--query-gpu=utilization.gpu",
                "--format=csv,noheader,nounits",
                f"-lms={int(self.period_s * 1000)}",
                f"--id={self.device_index}",
            ]
            try:
                self._process = subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
                )
                self.source = "nvidia-smi"
                self._thread = threading.Thread(target=self._read_smi, daemon=True)
            except OSError:
                self._process = None
        if self._process is None and self._torch_reading() is not None:
            self.source = "torch.cuda.utilization"
            self._thread = threading.Thread(target=self._poll_torch, daemon=True)
        if self._thread is not None:
            self._thread.start()
        return self

    def _torch_reading(self) -> float | None:
        try:
            import torch

            return float(torch.cuda.utilization(self.device_index))
        except Exception:  # no pynvml, no driver: no samples
            return None

    def _read_smi(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            with contextlib.suppress(ValueError):
                self.samples.append((time.monotonic(), float(line.strip())))

    def _poll_torch(self) -> None:
        while not self._stop.wait(self.period_s):
            value = self._torch_reading()
            if value is not None:
                self.samples.append((time.monotonic(), value))

    def stop(self) -> None:
        self._stop.set()
        if self._process is not None:
            self._process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def summary(self, start: float | None = None, end: float | None = None) -> dict[str, Any]:
        values = [v for t, v in self.samples if (start is None or t >= start) and (end is None or t <= end)]
        return gpu_summary(values, self.source)


def gpu_summary(values: list[float], source: str | None) -> dict[str, Any]:
    if not values:
        return {"source": source, "samples": 0, "mean_utilization_pct": None, "busy_share": None}
    return {
        "source": source,
        "samples": len(values),
        "mean_utilization_pct": round(statistics.fmean(values), 1),
        "busy_share": round(sum(1 for v in values if v > 0) / len(values), 3),
    }


# -- driving one pass ------------------------------------------------------------------------------------------


def prepare_cache(cache: Path, cold: bool) -> None:
    """A cold pass starts from empty build and baseline caches; only a directory this script made
    (it holds CACHE_MARKER) or an empty one is ever cleared."""
    if cache.exists() and any(cache.iterdir()) and not (cache / CACHE_MARKER).exists():
        raise SystemExit(f"--cache-dir {cache} is not empty and was not made by this script; pick another")
    cache.mkdir(parents=True, exist_ok=True)
    (cache / CACHE_MARKER).touch()
    if cold:
        for sub in ("builds", "baselines"):
            shutil.rmtree(cache / sub, ignore_errors=True)
    elif not (cache / "builds").is_dir():
        raise SystemExit(f"no builds under {cache}: run the cold pass first with the same --cache-dir")


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {"cores": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        import torch

        env["torch"] = torch.__version__
        env["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    except Exception as exc:
        env["torch"] = f"unavailable ({exc})"
    return env


def run_pass(
    name: str, manifest: list[dict], args: argparse.Namespace, kb: Path, started: float
) -> dict[str, Any]:
    """One pass over `manifest` (kevin's order, hang candidates included when --hangs); harness (a)
    gets the others only."""
    from kevin.evaluator.evaluate import EvalConfig, device_lock_file
    from kevin.evaluator.timing import TimingConfig

    cache = Path(args.cache_dir)
    prepare_cache(cache, cold=name != "cached")  # the plain pass uses no kevin cache: start empty
    config = EvalConfig(
        backend="cuda",
        cache_dir=str(cache),
        timing=TimingConfig(budget_ms=args.timing_budget_ms, precision=args.timing_precision),
    )
    deadline = started + args.deadline_s
    scratch = Path(tempfile.mkdtemp(prefix="plain-", dir=args.out))
    sampler = GpuSampler().start()
    pass_started = time.monotonic()
    plain = None
    hang_ids = [r["id"] for r in manifest if r["kind"] == HANG]
    if name in ("cold", "plain") and args.harness in ("both", "plain") and args.a_limit > 0:
        lock = device_lock_file(config)
        plain = PlainRunner(
            interleaved([r for r in manifest if r["kind"] != HANG]),
            kb,
            lock,
            args.timing_budget_ms,
            args.a_limit,
            deadline,
            args.reserve_s,
            scratch,
            jobs=args.a_jobs,
        )
        plain.start()
    kevin_rows, kevin_wall = ([], 0.0)
    if args.harness in ("both", "kevin") and name != "plain":
        journal = Path(args.out) / pass_file(name, args.hangs).replace(".json", "_rows.jsonl")  # kept if cut
        kevin_rows, kevin_wall = run_kevin(
            manifest, kb, config, args.jobs, deadline, args.reserve_s, args.grace_s, journal
        )
    if plain is not None:
        plain.join(timeout=max(deadline + args.grace_s - time.monotonic(), 1.0))
    sampler.stop()
    shutil.rmtree(scratch, ignore_errors=True)
    report: dict[str, Any] = {
        "pass": name,
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "environment": environment(),
        "config": {
            "jobs": args.jobs,
            "timing_budget_ms": args.timing_budget_ms,
            "timing_precision": args.timing_precision,
            "a_limit": args.a_limit,
            "a_jobs": args.a_jobs,
            "deadline_s": args.deadline_s,
            "hangs": bool(hang_ids),
            "kernelbench": str(kb),
            "cache_dir": str(cache),
        },
        "gpu": sampler.summary(pass_started),
        "kevin": {"rows": kevin_rows, "summary": summarize_kevin(kevin_rows, kevin_wall)},
    }
    plain_rows = list(plain.results) if plain is not None else []
    if plain is not None:
        plain_wall = (plain.finished_at or time.monotonic()) - (plain.started_at or pass_started)
        report["plain"] = {
            "rows": plain_rows,
            "summary": summarize_plain(plain_rows, plain_wall),
            "order": [r["id"] for r in plain.rows],
        }
    report["verdicts"] = verdict_table(manifest, plain_rows, kevin_rows)
    report["agreement"] = agreement(report["verdicts"])
    if hang_ids:
        skipped = hang_ids if plain is not None else []
        report["hangs"] = hang_summary(kevin_rows, hang_ids, kevin_wall, skipped)
    return report


def pass_file(name: str, hangs: bool) -> str:
    """A pass with hangs in the mix has a file of its own, beside the same pass without them."""
    return f"throughput_{name}{'_hangs' if hangs else ''}.json"


def dry_run(manifest: list[dict], kb: Path, hangs: bool = False) -> int:
    """CPU-only: the manifest (every candidate, hang ones too), the problem files, the static gate;
    nothing is built or run. `hangs`: kevin's order is shown with them in it."""
    from kevin import gate as checks

    problems = problems_needed(manifest)
    expected = {"correct": "correct", "slow": "correct", "wrong": "wrong", "compile_error": "compile_error"}
    expected[HANG] = "timeout"
    unfit = [
        r["id"] for r in manifest if expected.get(r["kind"]) != r["expected"] or not Path(r["path"]).is_file()
    ]
    missing = [p for p in problems if not (kb / p).is_file()]
    rejected = []
    for row in manifest:
        report = checks.check_source(Path(row["path"]).read_text(), "cuda")
        if not report.ok:
            rejected.append(row["id"])
    print(
        f"{len(manifest)} candidates over {len(problems)} problems; kinds {_count(r['kind'] for r in manifest)}"
    )
    print(
        f"KernelBench dir {kb}: {len(problems) - len(missing)}/{len(problems)} problem files present"
        + (f"; missing {', '.join(missing)}" if missing else "")
    )
    print(
        f"static gate: {len(manifest) - len(rejected)}/{len(manifest)} accepted"
        + (f"; rejected {', '.join(rejected)}" if rejected else "")
    )
    if unfit:
        print(f"manifest: unknown kind, wrong expected verdict or no file: {', '.join(unfit)}")
    batch = kevin_batch(manifest, hangs)
    held = [f"{r['id']} (#{i + 1})" for i, r in enumerate(batch) if r["kind"] == HANG]
    print(
        f"kevin's batch: {len(batch)} candidates"
        + (
            f", {len(held)} hang ({len(held) / len(batch):.1%}): {', '.join(held)}"
            if hangs
            else " (no hangs: --hangs adds them)"
        )
    )
    print("plain harness order:", " ".join(r["id"] for r in interleaved(manifest)))
    return 1 if missing or rejected or unfit else 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from kevin.evaluator.timing import TimingConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "bench" / "results"), help="report directory")
    parser.add_argument("--kernelbench", default=None, help="KernelBench dir with level1/ and level2/")
    parser.add_argument(
        "--passes",
        default="cold",
        help="comma-separated: cold, cached, plain (plain: only harness (a), over every candidate "
        "it has time for; its verdicts are then compared with kevin's cold pass) (default cold)",
    )
    parser.add_argument("--harness", choices=("both", "kevin", "plain"), default="both")
    parser.add_argument(
        "--a-limit", type=int, default=16, help="most candidates for the plain harness (default 16)"
    )
    parser.add_argument(
        "--a-jobs",
        type=int,
        default=1,
        help="plain-harness candidates at once (default 1: sequential); builds overlap, GPU work does not",
    )
    parser.add_argument("--jobs", type=int, default=14, help="kevin evaluations in flight (default 14)")
    parser.add_argument(
        "--timing-budget-ms", type=float, default=2000.0, help="timing budget, both harnesses"
    )
    parser.add_argument(
        "--timing-precision",
        type=float,
        default=TimingConfig.precision,
        help=f"kevin's adaptive timing: the median to +-this share (default {TimingConfig.precision}; "
        "0 spends the whole budget, the setting to compare verdicts against)",
    )
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=530.0,
        help="wall-clock budget of the whole invocation (default 530, under a 600 s device call)",
    )
    parser.add_argument(
        "--reserve-s",
        type=float,
        default=150.0,
        help="no new plain candidate or kevin submission this close to the deadline",
    )
    parser.add_argument(
        "--grace-s", type=float, default=40.0, help="wait this long past the deadline for stragglers"
    )
    parser.add_argument(
        "--cache-dir", default="/tmp/kevin-throughput-cache", help="kevin's build/baseline caches"
    )
    parser.add_argument("--only", default="", help="substring filter on candidate ids (for a quick check)")
    parser.add_argument(
        "--hangs",
        action="store_true",
        help="add the hang candidates (about 5%%) to kevin's passes; harness (a) never runs them",
    )
    parser.add_argument(
        "--list-problems", action="store_true", help="print the KernelBench files needed and exit"
    )
    parser.add_argument("--dry-run", action="store_true", help="check everything that needs no GPU and exit")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite eval_throughput.md from the throughput_*.json under --out and exit",
    )
    return parser.parse_args(argv)


def write_report(out: Path, reports: list[dict[str, Any]]) -> None:
    """eval_throughput.md from the pass reports, with eval_throughput_notes.md from the same folder
    (hand-written provenance: which machine, which runs were merged) under the title if present."""
    notes = out / NOTES_FILE
    (out / "eval_throughput.md").write_text(
        markdown(reports, notes.read_text().strip() if notes.is_file() else "")
    )
    compared = hang_comparisons(reports)
    if compared:
        (out / "eval_throughput_hangs.json").write_text(json.dumps(compared, indent=1))


def print_summaries(reports: list[dict[str, Any]]) -> None:
    for report in with_full_plain(reports):
        print(summary_text(report, hang_peer(report, reports)), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    everything = [r for r in load_manifest(hangs=True) if args.only in r["id"]]
    manifest = kevin_batch(everything, args.hangs)
    kb = kernelbench_dir(args.kernelbench)
    if args.list_problems:
        for problem in problems_needed(manifest):
            print(problem)
        return 0
    if args.dry_run:
        return dry_run(everything, kb, args.hangs)
    if args.report_only:
        found = [json.loads(p.read_text()) for p in sorted(Path(args.out).glob("throughput_*.json"))]
        if not found:
            print(f"no throughput_*.json under {args.out}", file=sys.stderr)
            return 2
        write_report(Path(args.out), found)
        print_summaries(found)
        return 0
    missing = [p for p in problems_needed(manifest) if not (kb / p).is_file()]
    if missing:
        print(
            f"KernelBench files missing under {kb}: {', '.join(missing)} (see --list-problems)",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reports = []
    for name in [p.strip() for p in args.passes.split(",") if p.strip()]:
        if name not in ("cold", "cached", "plain"):
            print(f"unknown pass {name!r}; use cold, cached and/or plain", file=sys.stderr)
            return 2
        batch = manifest if name != "plain" else [r for r in manifest if r["kind"] != HANG]
        report = run_pass(name, batch, args, kb, started)
        (out / pass_file(name, "hangs" in report)).write_text(json.dumps(report, indent=1, default=str))
        reports.append(report)
    found = [json.loads(p.read_text()) for p in sorted(out.glob("throughput_*.json"))]
    write_report(out, found)
    print_summaries(found)
    return 0


def _stragglers() -> bool:
    """kevin evaluations still running past the grace period (non-daemon threads)."""
    main_thread = threading.main_thread()
    return any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not main_thread)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    if _stragglers():
        # The report is written; do not wait for evaluations past the deadline. Only here, never
        # inside main(): a caller in the same process (a test) would be killed with it.
        os._exit(code)
    sys.exit(code)
