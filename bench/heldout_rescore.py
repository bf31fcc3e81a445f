"""Re-score a learning run's held-out kernels with one evaluator, so both ends of a comparison are judged alike.

A run carried across sessions can outlive an evaluator change: session 23's held-out verdicts (some
of its timings were 8 ms slices of a shared core) and those of a continuation under a later
evaluator would meet in one paired comparison (bench/heldout_paired.py), and a change of the
evaluator would read as a change of the policy. This evaluates the held-out rows of the chosen
steps again (default: the first and the last), each distinct (task, kernel) once, with the
evaluator the run's own config names, and writes those rows again with the new verdicts
(`rescored: true`, the old verdict's outcome and times kept as `verdict_before`) to
rl/heldout_rescored.jsonl, which heldout_paired reads as it reads heldout.jsonl. Rows without a
kernel (a format error) keep their verdict: no evaluator judged them.

    python bench/heldout_rescore.py RUN_DIR [--steps 0,40] [--out FILE]

RUN_DIR is the RL run directory (config.json, heldout.jsonl); the task files its config names must
exist (on the GPU machine: the run's work folder). Progress: one line per 8 verdicts. Exit 2 on bad
input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.evaluator.result import EvalResult
from kevin.rl.episodes import read_episodes, stored

HELDOUT_FILE = "heldout.jsonl"
RESCORED_FILE = "heldout_rescored.jsonl"
BEFORE_FIELDS = ("stage", "blame", "correct", "flags", "speedup", "runtime_ms", "baseline_ms")
"""What a re-scored row keeps of its old verdict (`verdict_before`)."""


def parse_steps(asked: str) -> list[int]:
    """`--steps` as given ("0,40"): the steps, ascending, each once."""
    try:
        steps = sorted({int(part) for part in asked.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"--steps {asked!r}: give step numbers separated by commas, e.g. 0,40") from None
    if not steps or steps[0] < 0:
        raise UsageError(f"--steps {asked!r}: give steps >= 0")
    return steps


def chosen_steps(rows: list[dict[str, Any]], asked: str | None) -> list[int]:
    steps = sorted({int(r.get("step", 0)) for r in rows})
    if not steps:
        raise UsageError("the run has no held-out rows")
    if not asked:
        return sorted({steps[0], steps[-1]})
    wanted = parse_steps(asked)
    missing = [s for s in wanted if s not in steps]
    if missing:
        raise UsageError(f"--steps: no held-out rows at step(s) {missing} (steps: {steps})")
    return wanted


def rescore(
    rows: list[dict[str, Any]],
    steps: list[int],
    tasks: dict[str, Any],
    submit: Callable[[Any, str], Any],
    say: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """The rows of `steps`, each with a verdict from `submit(task, source)` (a Future of an
    EvalResult), every distinct (task, kernel) evaluated once."""
    kept = [r for r in rows if int(r.get("step", 0)) in steps]
    unknown = sorted({r["task"] for r in kept} - set(tasks))
    if unknown:
        raise UsageError(
            f"held-out task(s) {unknown[:5]} are not among the run's tasks; is the family folder there?"
        )
    distinct = sorted({(r["task"], r["candidate"]) for r in kept if r.get("candidate")})
    futures = {submit(tasks[task], source): (task, source) for task, source in distinct}
    verdicts: dict[tuple[str, str], dict[str, Any]] = {}
    started = time.monotonic()
    for future in as_completed(futures):
        key = futures[future]
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - the evaluator's own failure: not the kernel's
            result = EvalResult(stage="runtime", blame="infrastructure", error=str(exc)[:500], task_id=key[0])
        verdict = result.to_dict()
        verdict.pop("log", None)
        verdicts[key] = verdict
        if len(verdicts) % 8 == 0 or len(verdicts) == len(distinct):
            say(
                f"heldout_rescore: {len(verdicts)}/{len(distinct)} kernels judged ({time.monotonic() - started:.0f} s)"
            )
    out = []
    for row in kept:
        verdict = verdicts.get((row["task"], row["candidate"])) if row.get("candidate") else None
        if verdict is None:
            out.append(dict(row, rescored=False))
            continue
        before = row.get("verdict") or {}
        kept_before = {k: before[k] for k in BEFORE_FIELDS if before.get(k) is not None}
        out.append(dict(row, verdict=verdict, rescored=True, verdict_before=kept_before))
    return out


def summary(rows: list[dict[str, Any]]) -> str:
    """Per step: share passed and mean speedup (failures 0) before and after re-scoring."""
    lines = []
    for step in sorted({r["step"] for r in rows}):
        at = [r for r in rows if r["step"] == step]
        old = [EvalResult.from_dict(r["verdict_before"] if r.get("rescored") else r["verdict"]) for r in at]
        new = [EvalResult.from_dict(r["verdict"]) for r in at]
        lines.append(
            f"step {step}: {len(at)} rows, passed {_share(old):.3f} -> {_share(new):.3f}, "
            f"mean speedup {_speedup(old):.3f} -> {_speedup(new):.3f}"
        )
    return "\n".join(lines)


def _share(results: list[EvalResult]) -> float:
    return sum(r.passed for r in results) / len(results) if results else 0.0


def _speedup(results: list[EvalResult]) -> float:
    return sum((r.speedup or 0.0) if r.passed else 0.0 for r in results) / len(results) if results else 0.0


def main(argv: list[str] | None = None, evaluator_factory: Callable[[Any], Any] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="the RL run directory (config.json, heldout.jsonl)")
    parser.add_argument(
        "--steps", default=None, help="held-out steps to re-score, e.g. 0,40 (default: first and last)"
    )
    parser.add_argument("--out", type=Path, default=None, help=f"default: RUN/{RESCORED_FILE}")
    args = parser.parse_args(argv)
    try:
        return _run(args, evaluator_factory)
    except UsageError as exc:
        print(f"heldout_rescore: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, evaluator_factory: Callable[[Any], Any] | None) -> int:
    from kevin.train.launch import load_split
    from kevin.train.overrides import load_config
    from kevin.train.rollout import build_evaluator

    path = stored(args.run / HELDOUT_FILE)
    if not path.is_file():
        raise UsageError(f"no {path}; pass the RL run directory of a learning run")
    config = load_config(args.run)
    rows = read_episodes(path)
    steps = chosen_steps(rows, args.steps)
    try:
        _, heldout = load_split(config, None)
    except (OSError, ValueError) as exc:
        raise UsageError(f"the run's tasks ({config.loop.tasks}) did not load: {exc}") from None
    evaluator = (evaluator_factory or (lambda c: build_evaluator(c.evaluator, c.rollout.backend)))(config)
    try:
        rescored = rescore(rows, steps, {t.id: t for t in heldout}, evaluator.submit)
    finally:
        close = getattr(evaluator, "close", None)
        if close is not None:
            close()
    out = args.out or args.run / RESCORED_FILE
    with out.open("w", encoding="utf-8") as handle:
        for row in rescored:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    print(summary(rescored))
    print(
        f"heldout_rescore: {len(rescored)} rows of steps {steps} in {out}; then: python bench/heldout_paired.py {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
