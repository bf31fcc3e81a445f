"""Does kevin's clock agree with an independent one? (issue #3 acceptance, run on the GPU machine)

For KernelBench level-1 problems with honest CUDA candidates of our own (bench/candidates/):

  1. kevin:        `evaluate()` of each pair (sandboxed, fresh inputs per timed call, L2 flush).
  2. independent:  in this process, eager Model and ModelNew timed with triton.testing.do_bench
                   (median), same inputs; speedup = median(Model) / median(ModelNew).
  3. self:         a kernel timed against itself: the problem's Model is the candidate's own kernel,
                   so the speedup must read 1.00 +- 0.03.
  4. repeats:      the same pair evaluated N times: the spread of kevin's speedup.

Usage (GPU machine):  PYTHONPATH=. python bench/eval_agreement.py --out bench/results
Writes eval_agreement.json and eval_agreement.md under --out and prints the table last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin.evaluator import build  # noqa: E402
from kevin.evaluator.batch import Pair, run_batch  # noqa: E402
from kevin.evaluator.evaluate import EvalConfig, device_lock, evaluate  # noqa: E402
from kevin.evaluator.timing import TimingConfig  # noqa: E402
from kevin.tasks import Task  # noqa: E402

CANDIDATES = REPO / "bench" / "candidates" / "kernelbench_l1"


def kernelbench_dir() -> Path:
    return Path(os.environ.get("KEVIN_KERNELBENCH_DIR", REPO.parent / "shared" / "kernelbench_data"))


def load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def independent_speedup(problem_src: str, candidate_src: str, name: str) -> dict:
    import torch
    from triton.testing import do_bench

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    problem = load(problem_src, f"indep_problem_{name}")
    candidate = load(candidate_src, f"indep_candidate_{name}")
    init = problem.get_init_inputs()
    torch.manual_seed(0)
    model = problem.Model(*init).cuda()
    torch.manual_seed(0)
    model_new = candidate.ModelNew(*init).cuda()
    torch.manual_seed(1)
    with torch.device("cuda"):
        inputs = problem.get_inputs()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        ref_ms = do_bench(lambda: model(*inputs), warmup=100, rep=500, return_mode="median")
        new_ms = do_bench(lambda: model_new(*inputs), warmup=100, rep=500, return_mode="median")
    inputs = model = model_new = None
    torch.cuda.empty_cache()
    return {"baseline_ms": ref_ms, "runtime_ms": new_ms, "speedup": ref_ms / new_ms}


def self_problem(problem_src: str, candidate_src: str) -> str:
    """A problem whose Model is the candidate's own kernel; sizes, inputs and init come from the
    real problem (its top-level statements other than imports and the Model class)."""
    import ast

    tree = ast.parse(problem_src)
    kept = [
        ast.get_source_segment(problem_src, node)
        for node in tree.body
        if not isinstance(node, (ast.Import, ast.ImportFrom))
        and not (isinstance(node, ast.ClassDef) and node.name == "Model")
    ]
    return re.sub(r"\bclass ModelNew\b", "class Model", candidate_src) + "\n\n" + "\n\n".join(kept) + "\n"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="", help="substring of the problems to include (default: all)")
    parser.add_argument("--cache-dir", default="/tmp/kevin-bench-cache")
    return parser.parse_args()


def find_pairs(kb: Path, only: str) -> list[Pair]:
    """Each of our candidates whose KernelBench level-1 problem exists, `only` in its name."""
    pairs = []
    for candidate in sorted(CANDIDATES.glob("*.py")):
        problem = kb / candidate.name
        if problem.is_file() and only in candidate.stem:
            pairs.append(Pair(f"L1_{candidate.stem}", problem, candidate))
    return pairs


def eval_config(cache_dir: str) -> EvalConfig:
    # The static gate is exercised by the adversarial benchmark; this one is about the clock.
    return EvalConfig(
        backend="cuda",
        baseline_cache=False,
        cache_dir=cache_dir,
        static_check=False,
        timing=TimingConfig(budget_ms=2000),
    )


def run_kevin(pairs: list[Pair], out: Path, config: EvalConfig) -> tuple[list[dict], float]:
    """kevin's rows for every pair, evaluated as one batch, and the batch's wall seconds."""
    started = time.time()
    results_path = out / "eval_agreement_results.jsonl"
    results_path.unlink(missing_ok=True)
    rows = run_batch(pairs, results_path, config, jobs=len(pairs), progress=False)
    return rows, time.time() - started


def agreement_rows(pairs: list[Pair], rows: list[dict], config: EvalConfig) -> list[dict]:
    """Per pair: kevin's speedup next to the independent do_bench one, and how far apart they are."""
    table = []
    for pair, row in zip(pairs, rows, strict=True):
        with device_lock(config).exclusive():  # never time while a kevin worker times on the same GPU
            indep = independent_speedup(
                pair.problem.read_text(), pair.candidate.read_text(), pair.candidate.stem
            )
        agree = row["speedup"] / indep["speedup"] - 1 if row.get("speedup") else None
        table.append(
            {
                "id": pair.id,
                "stage": row["stage"],
                "kevin_speedup": row.get("speedup"),
                "kevin_runtime_ms": row.get("runtime_ms"),
                "kevin_baseline_ms": row.get("baseline_ms"),
                "indep_speedup": indep["speedup"],
                "indep_runtime_ms": indep["runtime_ms"],
                "indep_baseline_ms": indep["baseline_ms"],
                "rel_diff": agree,
                "cv": (row.get("timing") or {}).get("cv"),
                "flags": row.get("flags"),
            }
        )
        print("agreement", json.dumps(table[-1]), flush=True)
    return table


def self_rows(pairs: list[Pair], config: EvalConfig) -> list[dict]:
    """Each pair's kernel evaluated against itself (Model = the candidate's kernel)."""
    rows = []
    for pair in pairs:
        source = self_problem(pair.problem.read_text(), pair.candidate.read_text())
        task = Task.from_source(source, id=f"self_{pair.id}", name="self")
        result = evaluate(task, pair.candidate.read_text(), config)
        rows.append(
            {"id": pair.id, "stage": result.stage, "speedup": result.speedup, "error": result.error[:300]}
        )
        print("self", json.dumps(rows[-1]), flush=True)
    return rows


def repeat_spread(pair: Pair, config: EvalConfig, repeats: int) -> dict:
    """The speedups and runtimes of `repeats` evaluations of one pair, and their CVs."""
    task = Task.from_source(pair.problem.read_text(), id=pair.id, name="repeat")
    results = [evaluate(task, pair.candidate.read_text(), config) for _ in range(repeats)]
    speedups = [r.speedup for r in results if r.speedup]
    runtimes = [r.runtime_ms for r in results if r.runtime_ms]
    return {
        "id": pair.id,
        "speedups": speedups,
        "speedup_mean": statistics.fmean(speedups) if speedups else None,
        "speedup_cv": statistics.pstdev(speedups) / statistics.fmean(speedups) if len(speedups) > 1 else None,
        "runtime_ms": runtimes,
        "runtime_cv": statistics.pstdev(runtimes) / statistics.fmean(runtimes) if len(runtimes) > 1 else None,
    }


def markdown(report: dict, repeats: int) -> list[str]:
    """eval_agreement.md, line by line: the agreement table, the self-timing table, the spread."""
    spread = report["repeats"]
    md = [
        f"# Evaluator timing agreement ({report['gpu']}, torch {report['torch']})",
        "",
        "Made by `PYTHONPATH=. python bench/eval_agreement.py --out bench/results` on the GPU machine.",
        "",
        "| problem | stage | kevin speedup | do_bench speedup | rel. diff | kevin runtime ms | do_bench runtime ms | CV |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["agreement"]:
        md.append(
            f"| {r['id']} | {r['stage']} | {_f(r['kevin_speedup'])} | {_f(r['indep_speedup'])} | "
            f"{_pct(r['rel_diff'])} | {_f(r['kevin_runtime_ms'])} | {_f(r['indep_runtime_ms'])} | {_f(r['cv'])} |"
        )
    md += [
        "",
        "Kernel timed against itself (Model = the candidate's kernel):",
        "",
        "| kernel | stage | speedup |",
        "|---|---|---|",
    ]
    md += [f"| {r['id']} | {r['stage']} | {_f(r['speedup'])} |" for r in report["self"]]
    md += [
        "",
        f"Spread of {repeats} repeated evaluations of {spread['id']}: speedups "
        f"{', '.join(_f(s) for s in spread['speedups'])}; CV of speedup {_pct(spread['speedup_cv'])}, "
        f"CV of runtime {_pct(spread['runtime_cv'])}.",
    ]
    return md


def main() -> int:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kb = kernelbench_dir() / "level1"
    if not kb.is_dir():
        print(f"KernelBench not found at {kb}; set KEVIN_KERNELBENCH_DIR", file=sys.stderr)
        return 2

    pairs = find_pairs(kb, args.only)
    config = eval_config(args.cache_dir)
    rows, kevin_s = run_kevin(pairs, out, config)

    build.install(Path(args.cache_dir) / "builds", build.BuildLog())  # reuse the sandbox's builds
    table = agreement_rows(pairs, rows, config)
    fast = sorted(pairs, key=lambda p: "Gelu" not in p.id and "Softmax" not in p.id)  # quickest to time
    selfs = self_rows(fast[:2], config)
    spread = repeat_spread(fast[0], config, args.repeats)
    import torch

    report = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "kevin_batch_s": kevin_s,
        "agreement": table,
        "self": selfs,
        "repeats": spread,
    }
    (out / "eval_agreement.json").write_text(json.dumps(report, indent=1))
    md = markdown(report, args.repeats)
    (out / "eval_agreement.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


def _f(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:+.2f}%"


if __name__ == "__main__":
    sys.exit(main())
