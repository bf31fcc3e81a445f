"""A learning run's start and a later checkpoint sampled on many more held-out samples, paired.

A run evaluates its held-out tasks with a few samples each (the learning run: 16 tasks x 2): enough
to follow it, too few to tell a rise of a few kernels from chance (bench/heldout_paired.py: s23's
+4 / -0 of 32 has p 0.125). This loads the run's starting weights (step 0: the model its config
names, before any update) and the checkpoint of each later step asked for, samples the held-out
tasks `--trajectories` times each with the run's own held-out sampler (kevin.train.loop.
evaluate_heldout: the same seed at every evaluation, so sample i of a task is drawn from the same
random numbers at both steps), judges every sample with the evaluator the run's config names (an
identical kernel once), and writes the rows to OUT/heldout.jsonl, then prints bench/
heldout_paired.py's comparison of each step with the start. With 8 samples a task the sign test
sees four times the pairs.

    python bench/heldout_wide.py RUN_DIR --out OUT [--steps 0,LAST] [--trajectories 8]

RUN_DIR is the RL run directory (config.json, tokenizer/, checkpoints/); the model and task files
its config names must be there (on the GPU machine: the learning run's work folder). A step other
than 0 needs its checkpoint (a run keeps its last two). OUT must not hold a run. Progress: one line
per evaluated step. Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from kevin.errors import UsageError  # noqa: E402

HELDOUT_FILE = "heldout.jsonl"


def checkpoint_for(run_dir: Path, step: int) -> Path | None:
    """The checkpoint of `step` in `run_dir` (None for step 0: the run's starting weights)."""
    from kevin.train.checkpoint import CHECKPOINTS_DIR

    if step == 0:
        return None
    path = run_dir / CHECKPOINTS_DIR / f"step_{step:06d}"
    if not path.is_dir():
        kept = sorted(p.name for p in (run_dir / CHECKPOINTS_DIR).glob("step_*") if p.is_dir())
        raise UsageError(f"no checkpoint of step {step} in {run_dir} (kept: {', '.join(kept) or 'none'})")
    return path


def chosen_steps(run_dir: Path, asked: str | None) -> list[int]:
    """The steps asked for (0 first), or 0 and the run's latest checkpoint."""
    from kevin.train.checkpoint import latest_checkpoint

    if asked:
        from heldout_rescore import parse_steps

        return parse_steps(asked)
    latest = latest_checkpoint(run_dir)
    if latest is None:
        raise UsageError(f"{run_dir} has no checkpoint; pass --steps 0 for the start alone")
    return sorted({0, int(latest.name.split("_")[-1])})


def evaluate_wide(
    run_dir: Path,
    out: Path,
    steps: list[int],
    trajectories: int,
    *,
    tasks: Sequence[Any] | None = None,
    policy_factory: Callable[[Any], Any] | None = None,
    evaluator_factory: Callable[[Any], Any] | None = None,
    say: Callable[[str], None] = print,
) -> Path:
    """Sample and judge the held-out tasks at each of `steps` (ascending, from the start's weights
    on); return OUT's held-out file. `tasks`, `policy_factory` and `evaluator_factory` as for
    kevin.train.loop.train (tests)."""
    from kevin.train.checkpoint import load_checkpoint
    from kevin.train.launch import close, setup
    from kevin.train.loop import evaluate_heldout
    from kevin.train.model import TOKENIZER_DIR
    from kevin.train.overrides import apply_overrides, load_config

    if trajectories < 1:
        raise UsageError(f"--trajectories {trajectories}: give at least 1")
    if steps != sorted(set(steps)):
        raise UsageError(f"steps {steps}: give them ascending, each once")
    config = apply_overrides(
        load_config(run_dir),
        [f"loop.eval_trajectories={trajectories}", "loop.tensorboard=false", "loop.plot=false"],
    )
    paths = {step: checkpoint_for(run_dir, step) for step in steps}  # all found before any work
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} is not empty; pick a new --out")
    out.mkdir(parents=True, exist_ok=True)
    if (run_dir / TOKENIZER_DIR).is_dir():  # the run's own tokenizer, not one built again
        shutil.copytree(run_dir / TOKENIZER_DIR, out / TOKENIZER_DIR)
    run = setup(
        config, out, tasks=tasks, policy_factory=policy_factory, evaluator_factory=evaluator_factory, out=say
    )
    try:
        for step in steps:
            path = paths[step]
            if path is None and step != steps[0]:
                raise UsageError("step 0 (the start's weights) must come first")
            if path is not None:
                load_checkpoint(path, model=run.model, optimizer=run.learner.optimizer, context=run.context)
            started = time.monotonic()
            metrics = evaluate_heldout(run, step)
            say(
                f"heldout_wide: step {step}: {len(run.heldout_tasks)} tasks x {trajectories}: correct "
                f"{metrics.get('heldout/correct', 0):.3f} speedup {metrics.get('heldout/speedup', 0):.3f} "
                f"({time.monotonic() - started:.0f} s)"
            )
    finally:
        close(run)
    return out / HELDOUT_FILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="the RL run directory (config.json, checkpoints/)")
    parser.add_argument("--out", type=Path, required=True, help="a new folder for the samples and verdicts")
    parser.add_argument("--steps", default=None, help="steps to sample, e.g. 0,40 (default: 0 and the latest)")
    parser.add_argument("--trajectories", type=int, default=8, help="samples per held-out task (default 8)")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    args = parser.parse_args(argv)
    try:
        if not (args.run / "config.json").is_file():
            raise UsageError(f"no {args.run / 'config.json'}; pass the RL run directory of a learning run")
        path = evaluate_wide(args.run, args.out, chosen_steps(args.run, args.steps), args.trajectories)
    except UsageError as exc:
        print(f"heldout_wide: {exc}", file=sys.stderr)
        return 2
    import heldout_paired

    return heldout_paired.main([str(path), "--resamples", str(args.resamples)])


if __name__ == "__main__":
    sys.exit(main())
