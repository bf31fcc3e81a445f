"""`kevin eval-batch`: evaluate many (problem, candidate) pairs, durably and resumably.

Input: a manifest, one JSON object per line, `{"id": ..., "problem": path, "candidate": path}`
(paths relative to the manifest), or with no manifest the bundled tasks and our own reference
candidates for the chosen back end (the README's main job until the trainer exists).

Output: one JSON line per finished pair, `{"id": ..., "problem": ..., "candidate": ..., **EvalResult}`,
appended and flushed as each finishes, so a crash loses nothing written; a rerun with the same
`--out` skips the ids already there. A table of verdicts and speedups is printed at the end.

Pairs are evaluated `--jobs` at a time through kevin.evaluator.service; each evaluation holds the device's
lock only while it runs and times (builds overlap freely), so timings never overlap on one device.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin.errors import UsageError

BUNDLED_DIR = Path(__file__).resolve().parents[1] / "tasks" / "bundled"


@dataclass(frozen=True)
class Pair:
    id: str
    problem: Path
    candidate: Path


def read_manifest(path: Path) -> list[Pair]:
    if not path.is_file():
        raise UsageError(f"manifest not found: {path} (one JSON object per line: id, problem, candidate)")
    pairs: list[Pair] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            pair = Pair(str(row["id"]), path.parent / row["problem"], path.parent / row["candidate"])
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(
                f"{path}:{number}: not a manifest row ({exc}); expected "
                '{"id": ..., "problem": path, "candidate": path}'
            ) from None
        if pair.id in seen:
            raise UsageError(f"{path}:{number}: id {pair.id!r} appears twice; ids must be unique")
        for file, what in ((pair.problem, "problem"), (pair.candidate, "candidate")):
            if not file.is_file():
                raise UsageError(f"{path}:{number}: {what} file not found: {file}")
        seen.add(pair.id)
        pairs.append(pair)
    return pairs


def bundled_pairs(backend: str) -> list[Pair]:
    """Our bundled tasks, each with its reference candidate for `backend`."""
    pairs = []
    for problem in sorted((BUNDLED_DIR / "tasks").glob("*.py")):
        candidate = BUNDLED_DIR / backend / problem.name
        if candidate.is_file():
            pairs.append(Pair(f"{backend}/{problem.stem}", problem, candidate))
    if not pairs:
        raise UsageError(f"no bundled candidates for backend {backend!r} under {BUNDLED_DIR}")
    return pairs


def done_ids(out: Path) -> set[str]:
    ids: set[str] = set()
    if out.is_file():
        for line in out.read_text().splitlines():
            try:
                ids.add(str(json.loads(line)["id"]))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a crash: evaluate that pair again
    return ids


def run_batch(
    pairs: list[Pair], out: Path, config: Any, jobs: int, size: str = "small", progress: bool = True
) -> list[dict[str, Any]]:
    """Evaluate every pair not already in `out` through the evaluation service; rows are appended
    and flushed as each finishes. Returns all rows for the pairs given."""
    from kevin.evaluator.service import EvaluationService
    from kevin.tasks import Task

    out.parent.mkdir(parents=True, exist_ok=True)
    finished = done_ids(out)
    todo = [p for p in pairs if p.id not in finished]
    bar = _progress(len(todo), progress)
    with EvaluationService(config, max_in_flight=max(jobs, 1)) as service:
        futures = {}
        for pair in todo:
            source = _problem_source(pair.problem, size)
            task = Task.from_source(source, id=pair.id, name=pair.problem.stem, origin=str(pair.problem))
            futures[service.submit(task, pair.candidate.read_text())] = pair
        for future in service.as_completed(futures):
            pair = futures[future]
            row = {
                "id": pair.id,
                "problem": str(pair.problem),
                "candidate": str(pair.candidate),
                **future.result().to_dict(),
            }
            with open(out, "a") as handle:
                handle.write(json.dumps(row, sort_keys=True) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            bar.set_postfix_str(f"{row['id']}: {row['stage']}", refresh=False)
            bar.update(1)
    bar.close()
    wanted = {p.id for p in pairs}
    rows = {}
    for line in out.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("id") in wanted:
            rows[row["id"]] = row
    return [rows[p.id] for p in pairs if p.id in rows]


def _problem_source(path: Path, size: str) -> str:
    source = path.read_text()
    if size != "small" and path.parent == BUNDLED_DIR / "tasks":
        source = source.replace('SIZE = "small"', f'SIZE = "{size}"', 1)
    return source


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total, unit="cand", file=sys.stderr, disable=not enabled or total == 0, dynamic_ncols=True
    )


def format_table(rows: list[dict[str, Any]]) -> str:
    header = (
        f"{'id':<34} {'stage':<12} {'ok':<4} {'speedup':>8} {'runtime_ms':>11} {'baseline_ms':>11}  flags"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        speedup = f"{row['speedup']:.3f}" if row.get("speedup") is not None else "-"
        runtime = f"{row['runtime_ms']:.4g}" if row.get("runtime_ms") is not None else "-"
        baseline = f"{row['baseline_ms']:.4g}" if row.get("baseline_ms") is not None else "-"
        passed = row.get("correct") and not _blocking(row)
        lines.append(
            f"{row['id']:<34} {row['stage']:<12} {'yes' if passed else 'no':<4} {speedup:>8} "
            f"{runtime:>11} {baseline:>11}  {','.join(row.get('flags') or [])}"
        )
    n_ok = sum(1 for r in rows if r.get("correct") and not _blocking(r))
    lines.append(f"{n_ok}/{len(rows)} correct")
    return "\n".join(lines)


def _blocking(row: dict[str, Any]) -> bool:
    from kevin.evaluator.result import EvalResult

    return bool(EvalResult.from_dict(row).blocking_flags)


def _run(args: Any) -> int:
    from kevin.evaluator.commands import config_from_args

    config = config_from_args(args)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1 (got {args.jobs})")
    if args.manifest:
        pairs = read_manifest(Path(args.manifest))
        size = args.size or "small"
    else:
        pairs = bundled_pairs(config.backend)
        size = args.size or ("large" if config.on_gpu else "small")
    out = Path(args.out) if args.out else Path("runs") / time.strftime("eval-%Y%m%d-%H%M%S") / "results.jsonl"
    print(
        f"evaluating {len(pairs)} candidates ({config.backend}, {config.precision}, size {size}) -> {out}",
        file=sys.stderr,
    )
    rows = run_batch(pairs, out, config, args.jobs, size=size, progress=not args.quiet)
    print(format_table(rows))
    return 0


def register_commands(subparsers: Any) -> None:
    from kevin.evaluator.commands import add_eval_options

    parser = subparsers.add_parser(
        "eval-batch",
        help="evaluate many candidates (a manifest, or the bundled set)",
        description="Evaluate every pair of a manifest, appending one JSON line per result to --out.",
    )
    parser.add_argument("--manifest", help="JSONL of {id, problem, candidate}; default: the bundled set")
    parser.add_argument("--out", help="results JSONL (appended; ids already there are skipped)")
    parser.add_argument("--jobs", type=int, default=2, help="evaluations in flight (default 2)")
    parser.add_argument(
        "--size",
        choices=("small", "large"),
        default=None,
        help="bundled task size (default: small for cpp, large for cuda)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_eval_options(parser)
    parser.set_defaults(run=_run)
