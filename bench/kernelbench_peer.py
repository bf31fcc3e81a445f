"""KernelBench's own evaluator on kevin's throughput candidates (issue #15's side-by-side peer).

Issue #15 asks kevin for >= 2x the candidates/hour of KernelBench's `eval_kernel_against_ref` with a
parallel pre-build, on the same candidates on the same GPU machine. This runs that peer over the mix
of bench/eval_throughput.py (its manifest; the hang kind only with --hangs; its plain harness's
interleaved order, so any prefix covers every kind) with KernelBench's code imported at run time
from --kernelbench-src (default .peers/KernelBench, made by bench/fetch_peer.sh), as its
scripts/eval_from_generations.py drives it:
  phase 1  --build-jobs (16) at once, kernelbench.eval.build_compile_cache(src, build_dir) per
           candidate in a fresh process and a build dir of its own (its compile.batch_compile runs
           the same call in a process pool; here a hung build is killed at --timeout-s, not retried);
  phase 2  one at a time, each in a fresh process (as its batch_eval's new pool per batch),
           eval_kernel_against_ref on that build dir with EVAL_SETTINGS and 5 correctness and 100
           perf trials (its script's; the function's own defaults are 1 and 10, untimed): fp32 at
           atol = rtol = 1e-4, the excessive-speedup check timing the reference too.
Both set TORCH_CUDA_ARCH_LIST by its utils.set_gpu_arch(--gpu-arch: Hopper, 9.0+PTX). No candidate
starts after --deadline-s (530); a step running at deadline + --grace-s is killed: not_run, cut.

Per candidate: its compiled, correctness, runtime and ref_runtime (ms, means of its get_timing_stats;
its comments say us), metadata excerpts, each step's seconds (process start included), and the
verdict: compile_error, wrong, correct, timeout (killed at --timeout-s), error (an exception escaped
eval_kernel_against_ref, which its script books as compiled False; it returned None, its lock-file
"retry"; the process died with no answer) or not_run. Answers come back in a file, never from stdout
(KernelBench and the candidate print: WORK/<id>/<step>.log). kernelbench_peer.json and .md under
--out are rewritten after each candidate; candidates/hour is over the whole wall, pre-build included.

Stubs: kernelbench/__init__ imports its utils, which import python-dotenv (calling load_dotenv()),
openai and litellm; eval.py imports pydantic (KernelExecResult is a BaseModel) and requests. The H200
image lacks pydantic, python-dotenv, openai and litellm: each child stubs in sys.modules those of
STUBS that do not import (BaseModel with defaults and model_dump, a no-op load_dotenv, the rest raise
if called: only LLM queries use them); the report's `stubbed` names them.

Usage. Here: `fetch` github:ScalingIntelligence/KernelBench (search tool), `bash bench/fetch_peer.sh
MIRROR_GIT_DIR`. On the GPU machine, carry [".peers/KernelBench", ".kb"]:
    PYTHONPATH=. python3 bench/kernelbench_peer.py --out $OUT
and kevin in the next call on the same machine (two 530 s runs do not fit in one call):
    PYTHONPATH=. python3 bench/eval_throughput.py --out $OUT --passes cold --harness kevin
Then here: `python bench/kernelbench_peer.py --out DIR --compare DIR/throughput_cold.json` (the
verdicts joined on candidate id, their agreement, both rates and their ratio: kernelbench_peer_compare
.json/.md). `--dry-run` checks the manifest, the problem files and the import; it runs nothing.

Not done: kevin is not run here; the judging is KernelBench's, not kevin's; the pre-build's ninja is
unlimited (as KernelBench leaves it). As in its flow a failed pre-build is still evaluated (the
compile retried); --skip-failed-builds books it compile_error. Each rate is over its own harness's
wall (kevin's from first submission to last result). Not yet run on a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import importlib.util
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_throughput import interleaved, kernelbench_dir, kevin_batch, problems_needed  # noqa: E402
from throughput_report import CANDIDATES, HANG, _count, _per_hour, load_manifest, spread  # noqa: E402

EVAL_SETTINGS = dict(seed_num=42, measure_performance=True, timing_method="cuda_event", backend="cuda")
"""eval_kernel_against_ref's arguments as its scripts/eval_from_generations.py passes them (precision
and device left at their defaults: fp32, the current device); the trial counts come from the CLI."""
REPORT = "kernelbench_peer"
COLUMNS = "id expected verdict compiled correctness runtime_ms ref_runtime_ms build_s eval_s".split()
FUNCTIONS = ("build_compile_cache", "eval_kernel_against_ref")


# -- importing KernelBench ------------------------------------------------------------------------------


class _BaseModel:
    """pydantic.BaseModel as KernelExecResult uses it: annotated class attributes are the defaults
    (deep-copied, so no two results share a metadata dict), keyword construction, model_dump."""

    def __init__(self, **values: Any):
        for name in self._fields():
            setattr(self, name, copy.deepcopy(getattr(type(self), name, None)))
        for name, value in values.items():
            setattr(self, name, value)

    @classmethod
    def _fields(cls) -> list[str]:
        return list(dict.fromkeys(n for k in reversed(cls.__mro__) for n in inspect.get_annotations(k)))

    def model_dump(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._fields()}


def _stub(name: str, **attributes: Any) -> types.ModuleType:
    """A module with `attributes`; any other public name is a function that raises when called."""

    def other(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)

        def missing(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"{name}.{attr}: {name} is not installed (a kernelbench_peer.py stub)")

        return missing

    module = types.ModuleType(name)
    module.__dict__.update(attributes, __getattr__=other)
    return module


# What kernelbench.eval imports at its top (with the package's __init__ and utils), stubbed only where
# it does not import: the H200 image lacks pydantic, dotenv, openai and litellm.
STUBS = {
    "pydantic": lambda: _stub("pydantic", BaseModel=_BaseModel),
    "dotenv": lambda: _stub("dotenv", load_dotenv=lambda *args, **kwargs: False),
    **{name: (lambda name=name: _stub(name)) for name in ("openai", "litellm", "requests", "tqdm")},
}


def import_kernelbench(src: Path) -> tuple[types.ModuleType, list[str]]:
    """kernelbench.eval from a KernelBench tree (the package under src/, or a bare package folder),
    after stubbing what does not import. Only in a child: a stub would hide a real install."""
    root = src / "src" if (src / "src" / "kernelbench").is_dir() else src
    if not (root / "kernelbench" / "eval.py").is_file():
        raise FileNotFoundError(f"no kernelbench/eval.py under {src}: run bash bench/fetch_peer.sh")
    sys.path.insert(0, str(root))
    stubbed = [name for name in STUBS if importlib.util.find_spec(name) is None]
    for name in stubbed:
        sys.modules[name] = STUBS[name]()
    return importlib.import_module("kernelbench.eval"), stubbed


# -- one step in a fresh process ---------------------------------------------------------------------


def _short(text: Any, limit: int = 300) -> str | None:
    text = None if text is None else str(text)
    return text if text is None or len(text) <= limit else text[: limit - 16] + " ...[truncated]"


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One step for one candidate, in this fresh process: `import`, `build` or `eval`."""
    kb_eval, stubbed = import_kernelbench(Path(spec["src"]))
    answer: dict[str, Any] = {
        "stubbed": stubbed,
        "torch": getattr(sys.modules.get("torch"), "__version__", None),
    }
    if spec["step"] == "import":
        return answer | {"has": [name for name in FUNCTIONS if hasattr(kb_eval, name)]}
    utils = sys.modules.get("kernelbench.utils")
    if spec["gpu_arch"] and hasattr(utils, "set_gpu_arch"):
        utils.set_gpu_arch(spec["gpu_arch"])  # as its scripts do before a build: TORCH_CUDA_ARCH_LIST
    source, started = Path(spec["candidate"]).read_text(), time.perf_counter()
    try:
        if spec["step"] == "build":
            built, _log, error = kb_eval.build_compile_cache(source, build_dir=spec["build_dir"])
            answer.update(built=bool(built), error=_short(error))
        else:
            problem = Path(spec["problem"]).read_text()
            result = kb_eval.eval_kernel_against_ref(
                problem, source, build_dir=spec["build_dir"], **spec["settings"]
            )
            dump = None if result is None else json.dumps(result.model_dump(), default=str)
            answer["result"] = None if dump is None else json.loads(dump)
    except Exception as exc:  # KernelBench raised: the step's answer (verdict `error`)
        answer["raised"] = _short(f"{type(exc).__name__}: {exc}")
    answer["call_s"] = round(time.perf_counter() - started, 3)
    return answer


@dataclass(frozen=True)
class Plan:
    """Where and how long the steps of one run go."""

    kb: Path
    """KernelBench problem files (level1/, level2/)."""
    src: Path
    """KernelBench's source tree."""
    work: Path
    """WORK/<id>/: the candidate's build dir, each step's spec, answer and log."""
    args: argparse.Namespace
    deadline: float
    """time.monotonic() after which no step starts."""
    hard_stop: float
    """time.monotonic() at which a running step is killed (cut)."""

    def run(self, step: str, row: dict[str, Any]) -> dict[str, Any]:
        """`step` for `row` in `python kernelbench_peer.py --child`, its own process group killed
        whole after --timeout-s, or at hard_stop, which makes it `cut`. The answer comes back in a
        file; without one, the log's last lines say why."""
        work, args = self.work / row["id"], self.args
        answer, log_path, spec_path = (work / f"{step}.{ext}" for ext in ("answer.json", "log", "spec.json"))
        work.mkdir(parents=True, exist_ok=True)
        answer.unlink(missing_ok=True)
        spec = {"step": step, "src": str(self.src), "candidate": row["path"], "answer": str(answer)}
        spec.update(
            problem=str(self.kb / row["problem"]), build_dir=str(work / "build"), gpu_arch=args.gpu_arch
        )
        trials = {"num_correct_trials": args.num_correct_trials, "num_perf_trials": args.num_perf_trials}
        spec["settings"] = {**EVAL_SETTINGS, **trials}
        spec_path.write_text(json.dumps(spec))
        allowed, started = min(args.timeout_s, self.hard_stop - time.monotonic()), time.monotonic()
        command = [sys.executable, str(Path(__file__).resolve()), "--child", str(spec_path)]
        with open(log_path, "w") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            timed_out = False
            try:
                process.wait(timeout=max(allowed, 0.1))
            except subprocess.TimeoutExpired:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        outcome = {"wall_s": round(time.monotonic() - started, 3), "timed_out": timed_out}
        outcome["cut"] = timed_out and allowed < args.timeout_s
        if answer.is_file():
            outcome.update(json.loads(answer.read_text()))
        elif not timed_out:
            tail = " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-3:])
            outcome["died"] = _short(f"exit {process.returncode}: {tail}")
        return outcome


# -- the two phases --------------------------------------------------------------------------------------


def prebuild(rows: list[dict[str, Any]], plan: Plan) -> dict[str, dict[str, Any] | None]:
    """Phase 1: build_compile_cache per candidate, --build-jobs at once; none starts after the deadline."""

    def one(row: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        return row["id"], plan.run("build", row) if time.monotonic() < plan.deadline else None

    with ThreadPoolExecutor(max(plan.args.build_jobs, 1)) as pool:
        return dict(pool.map(one, rows))


def evaluate(rows, builds, plan: Plan, on_row=None) -> list[dict[str, Any]]:
    """Phase 2: eval_kernel_against_ref for one candidate at a time; none starts after the deadline."""
    done: list[dict[str, Any]] = []
    for row in rows:
        build, outcome = builds.get(row["id"]), None
        if time.monotonic() < plan.deadline and build is not None:
            if plan.args.skip_failed_builds and build.get("built") is False:
                outcome = {"result": {"compiled": False}, "wall_s": 0.0}
            else:
                outcome = plan.run("eval", row)
            print(f"[kernelbench] {row['id']}: {peer_verdict(outcome)} ({outcome['wall_s']} s)", flush=True)
        done.append(peer_row(row, build, outcome))
        if on_row is not None:
            on_row(done)
    return done


# -- verdicts, rows, the report -----------------------------------------------------------------------------


def peer_verdict(outcome: dict[str, Any] | None) -> str:
    """A phase-2 outcome in the benchmark's words (the module docstring says which is which)."""
    if outcome is None:
        return "not_run"
    if "result" not in outcome and "raised" not in outcome:  # no answer from KernelBench
        return "not_run" if outcome.get("cut") else "timeout" if outcome.get("timed_out") else "error"
    result = outcome.get("result")
    if result is None:  # it raised, or returned None
        return "error"
    if not result.get("compiled"):
        return "compile_error"
    return "correct" if result.get("correctness") else "wrong"


def _ms(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None  # -1.0: not measured


def peer_row(row: dict[str, Any], build: dict | None, outcome: dict | None) -> dict[str, Any]:
    verdict, build, outcome = peer_verdict(outcome), build or {}, outcome or {}
    result = outcome.get("result") or {}
    metadata = result.get("metadata") or {}
    error = outcome.get("raised") or outcome.get("died")
    if outcome.get("timed_out") and "result" not in outcome:
        error = "cut at the deadline" if outcome.get("cut") else "timed out"
    elif "result" in outcome and outcome["result"] is None:
        error = "eval_kernel_against_ref returned None (its lock-file retry signal)"
    return {
        **{key: row.get(key) for key in ("id", "kind", "expected", "problem")},
        "verdict": verdict,
        "compiled": result.get("compiled"),
        "correctness": result.get("correctness"),
        "runtime_ms": _ms(result.get("runtime")),
        "ref_runtime_ms": _ms(result.get("ref_runtime")),
        "excessive_speedup": bool(metadata.get("excessive_speedup")),
        "built": build.get("built"),
        "build_error": build.get("error") or build.get("raised") or build.get("died"),
        "build_s": build.get("wall_s"),
        "eval_s": outcome.get("wall_s"),
        "error": error,
        "metadata": {k: v if isinstance(v, (bool, int, float)) else _short(v) for k, v in metadata.items()},
    }


def summarize(rows: list[dict[str, Any]], wall_s: float, build_phase_s: float) -> dict[str, Any]:
    done = [r for r in rows if r["verdict"] != "not_run"]
    return {
        "finished": len(done),
        "of": len(rows),
        "wall_s": round(wall_s, 2),
        "build_phase_s": round(build_phase_s, 2),
        "candidates_per_hour": _per_hour(len(done), wall_s),
        "verdicts": _count(r["verdict"] for r in done),
        "as_expected": sum(r["verdict"] == r["expected"] for r in done),
        "built_not_evaluated": sum(r["build_s"] is not None and r["verdict"] == "not_run" for r in rows),
        "build_s": spread([r["build_s"] for r in rows if r["build_s"] is not None]),
        "eval_s": spread([r["eval_s"] for r in done if r["eval_s"] is not None]),
    }


def summary_line(report: dict[str, Any]) -> str:
    s = report["summary"]
    return (
        f"KernelBench's evaluator: {s['finished']}/{s['of']} candidates in {s['wall_s']} s (pre-build "
        f"{s['build_phase_s']} s): {s['candidates_per_hour']} candidates/hour; verdicts {s['verdicts']}; "
        f"as expected {s['as_expected']}/{s['finished']}; stubbed {report.get('stubbed') or 'none'}"
    )


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows]


def write_report(out: Path, report: dict[str, Any]) -> None:
    c = report["config"]
    lines = [
        "# KernelBench's evaluator on the throughput candidates",
        "",
        f"KernelBench {c['kernelbench_commit']}: eval_kernel_against_ref, {c['num_correct_trials']} correctness "
        f"and {c['num_perf_trials']} perf trials, after a pre-build {c['build_jobs']} at once.",
        "",
        summary_line(report) + ("" if report.get("complete") else " (not complete)"),
        "",
        *_table(COLUMNS, [[r[k] for k in COLUMNS] for r in report["rows"]]),
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{REPORT}.json").write_text(json.dumps(report, indent=1, default=str))
    (out / f"{REPORT}.md").write_text("\n".join(lines) + "\n")


def run_peer(rows: list[dict[str, Any]], plan: Plan, out: Path) -> dict[str, Any]:
    """Both phases over `rows`; the report is rewritten after the pre-build and after each candidate."""
    started = time.monotonic()
    commit = plan.src / "COMMIT"
    config = {k: v for k, v in vars(plan.args).items() if k not in ("dry_run", "compare")}
    config.update(EVAL_SETTINGS, precision="fp32", kernelbench=str(plan.kb), work_dir=str(plan.work))
    config["kernelbench_commit"] = commit.read_text().strip() if commit.is_file() else None
    report: dict[str, Any] = {"command": " ".join([Path(sys.executable).name] + sys.argv), "config": config}
    builds = prebuild(rows, plan)
    build_phase_s = time.monotonic() - started
    answers = [b for b in builds.values() if b]
    report["stubbed"] = sorted({name for b in answers for name in b.get("stubbed", [])})
    report["torch"] = next((b["torch"] for b in answers if b.get("torch")), None)

    def save(done: list[dict[str, Any]], complete: bool = False) -> None:
        rest = [peer_row(r, builds.get(r["id"]), None) for r in rows[len(done) :]]
        report.update(rows=done + rest, complete=complete)
        report["summary"] = summarize(report["rows"], time.monotonic() - started, build_phase_s)
        write_report(out, report)

    save([])
    save(evaluate(rows, builds, plan, save), complete=True)
    return report


# -- side by side with kevin ---------------------------------------------------------------------------------


def compare(kevin_report: dict[str, Any], peer_report: dict[str, Any]) -> dict[str, Any]:
    """A throughput_<pass>.json of bench/eval_throughput.py joined on candidate id with a
    kernelbench_peer.json: the verdicts of every candidate both finished (they agree when they are the
    same word: kevin's flagged and rejected have no KernelBench counterpart) and both rates."""
    kevin_side = kevin_report.get("kevin") or {}
    kevin_summary, peer_summary = kevin_side.get("summary") or {}, peer_report["summary"]
    kevin = {
        r["id"]: r["verdict"] for r in kevin_side.get("rows", []) if r.get("verdict") not in (None, "not_run")
    }
    peer = {r["id"]: r for r in peer_report["rows"] if r["verdict"] != "not_run"}
    rows = [
        {"id": i, "expected": r.get("expected"), "kevin": kevin[i], "kernelbench": r["verdict"]}
        for i, r in peer.items()
        if i in kevin
    ]
    for row in rows:
        row["agree"] = row["kevin"] == row["kernelbench"]
    agree = sum(row["agree"] for row in rows)
    kevin_rate, peer_rate = kevin_summary.get("candidates_per_hour"), peer_summary.get("candidates_per_hour")
    return {
        "kevin_pass": kevin_report.get("pass"),
        "joined": len(rows),
        "agree": agree,
        "agreement": round(agree / len(rows), 3) if rows else None,
        "as_expected": {
            side: sum(r[side] == r["expected"] for r in rows) for side in ("kevin", "kernelbench")
        },
        "disagreements": [r for r in rows if not r["agree"]],
        "only_kevin": sorted(set(kevin) - set(peer)),
        "only_kernelbench": sorted(set(peer) - set(kevin)),
        "rates": {
            "kevin_per_hour": kevin_rate,
            "kernelbench_per_hour": peer_rate,
            "kevin_over_kernelbench": round(kevin_rate / peer_rate, 2) if kevin_rate and peer_rate else None,
            "kevin_wall_s": kevin_summary.get("wall_s"),
            "kernelbench_wall_s": peer_summary.get("wall_s"),
        },
        "rows": rows,
    }


def compare_files(kevin_path: Path, out: Path) -> int:
    peer_path = out / f"{REPORT}.json"
    if not peer_path.is_file() or not kevin_path.is_file():
        print(f"need both {peer_path} and {kevin_path}", file=sys.stderr)
        return 2
    result = compare(json.loads(kevin_path.read_text()), json.loads(peer_path.read_text()))
    rates = result["rates"]
    differ = ", ".join(
        f"{r['id']} (kevin {r['kevin']}, KernelBench {r['kernelbench']})" for r in result["disagreements"]
    )
    line = (
        f"kevin {rates['kevin_per_hour']}/h vs KernelBench {rates['kernelbench_per_hour']}/h: "
        f"{rates['kevin_over_kernelbench']}x (issue #15 asks >= 2x); verdicts agree on "
        f"{result['agree']}/{result['joined']}" + (f"; differ: {differ}" if differ else "")
    )
    header = ["candidate", "expected", "kevin", "KernelBench", "agree"]
    table = _table(header, [list(r.values()) for r in result["rows"]])
    (out / f"{REPORT}_compare.json").write_text(
        json.dumps({**result, "kevin_file": str(kevin_path)}, indent=1)
    )
    title = f"# kevin ({kevin_path.name}) beside KernelBench's evaluator"
    (out / f"{REPORT}_compare.md").write_text("\n".join([title, "", line, "", *table]) + "\n")
    print(line)
    return 0


# -- the command line ------------------------------------------------------------------------------------------


def dry_run(rows: list[dict[str, Any]], plan: Plan) -> int:
    """The candidate files, the problem files, and kernelbench.eval imported in a child; nothing built."""
    needed = problems_needed(rows)
    missing = [p for p in needed if not (plan.kb / p).is_file()]
    absent = [r["id"] for r in rows if not Path(r["path"]).is_file()]
    answer = plan.run("import", {"id": "dry_run", "path": "", "problem": ""})
    has = answer.get("has") or []
    print(f"{len(rows)} candidates, kinds {_count(r['kind'] for r in rows)}; no file: {absent or 'none'}")
    print(
        f"problem files under {plan.kb}: {len(needed) - len(missing)}/{len(needed)}; missing {missing or 'none'}"
    )
    if "has" in answer:
        print(f"KernelBench at {plan.src} imports (stubbed: {answer['stubbed'] or 'none'}); has {has}")
    else:
        print(f"KernelBench at {plan.src} does not import: {answer.get('died')}")
    return 1 if missing or absent or set(has) != set(FUNCTIONS) else 0


def candidate_order(everything: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """The plain harness's interleaved order (with --hangs the hang kind spread through it), then
    --only and --limit."""
    rows = [r for r in everything if args.only in r["id"]]
    order = kevin_batch(interleaved(rows) + [r for r in rows if r["kind"] == HANG], args.hangs)
    return order[: args.limit] if args.limit else order


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--out", default=str(REPO / "bench" / "results"), help="report directory")
    add("--kernelbench", default=None, help="problem files (dir with level1/, level2/)")
    add("--kernelbench-src", default=str(REPO / ".peers" / "KernelBench"), help="KernelBench's source")
    add("--manifest", default=str(CANDIDATES / "manifest.json"), help="the candidate set")
    add("--work-dir", default=None, help="build dirs and logs (default: a fresh temporary dir)")
    add("--build-jobs", type=int, default=16, help="pre-builds at once (default 16)")
    add("--num-correct-trials", type=int, default=5, help="its script's default: 5")
    add("--num-perf-trials", type=int, default=100, help="its script's default: 100")
    add("--gpu-arch", nargs="*", default=["Hopper"], help="set_gpu_arch names (none: torch's default)")
    add("--timeout-s", type=float, default=120.0, help="per candidate and step (default 120)")
    add("--deadline-s", type=float, default=530.0, help="no candidate starts after this (default 530)")
    add("--grace-s", type=float, default=50.0, help="after the deadline, running steps are cut")
    add("--skip-failed-builds", action="store_true", help="a failed pre-build is compile_error, not run")
    add("--hangs", action="store_true", help="add the manifest's hang candidates")
    add("--only", default="", help="substring filter on candidate ids")
    add("--limit", type=int, default=0, help="the first N candidates of the order (0: all)")
    add("--dry-run", action="store_true", help="check the inputs and the import; run nothing")
    add("--compare", default=None, metavar="THROUGHPUT_JSON", help="join --out's report with it; run nothing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        spec = json.loads(Path(argv[1]).read_text())
        partial = Path(spec["answer"] + ".partial")
        partial.write_text(json.dumps(child(spec), default=str))
        partial.replace(spec["answer"])  # whole or absent, even if killed meanwhile
        return 0
    args = parse_args(argv)
    if args.compare:
        return compare_files(Path(args.compare), Path(args.out))
    rows = candidate_order(load_manifest(Path(args.manifest), hangs=True), args)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kernelbench-peer-")).resolve()
    deadline = time.monotonic() + args.deadline_s
    src = Path(args.kernelbench_src).resolve()
    plan = Plan(kernelbench_dir(args.kernelbench), src, work, args, deadline, deadline + args.grace_s)
    if args.dry_run:
        return dry_run(rows, plan)
    missing = [p for p in problems_needed(rows) if not (plan.kb / p).is_file()]
    if missing or not rows:
        print(f"no candidates, or problem files missing under {plan.kb}: {missing}", file=sys.stderr)
        return 2
    report = run_peer(rows, plan, Path(args.out))
    print(f"logs and builds: {work}; report: {Path(args.out) / REPORT}.json")
    print(summary_line(report), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    if sys.argv[1:2] == ["--child"]:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # the answer is written: skip an exit that a broken kernel can hang or crash
    sys.exit(code)
