"""`kevin train`: run the trainer from a preset, with dotted overrides, in a run directory.

    kevin train [--preset smoke|h200|paper] [--set loss.clip_high=0.3 ...] [--run-dir DIR] [--resume] [--print-config]

The preset gives the whole config (kevin.train.presets); each `--set section.field=value` replaces one
field, parsed into its type. The resolved config is written to DIR/config.json; `--resume` continues
the run in DIR from its latest checkpoint and refuses a config that differs (only loop.steps,
loop.stop_after_steps and evaluator.cache_dir may change). Several processes: `torchrun --nproc-per-node N -m kevin train ...`.
Exit codes: 0 when the run ends (also when a collapse rule stopped it; the last line says so), 2 for
bad usage or input, with one line saying how to fix it.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from kevin.errors import UsageError
from kevin.train.overrides import apply_overrides
from kevin.train.presets import PRESETS, preset


def _default_run_dir(preset_name: str) -> Path:
    return Path("runs") / f"{preset_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _run(args: argparse.Namespace) -> int:
    config = apply_overrides(preset(args.preset), args.set or [])
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=2, sort_keys=True))
        return 0
    if args.resume and not args.run_dir:
        raise UsageError("--resume needs --run-dir: the run directory to continue")
    from kevin.train.loop import print_line, train

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run_dir = Path(args.run_dir) if args.run_dir else _default_run_dir(args.preset)
    result = train(config, run_dir, resume=args.resume, out=print_line)
    if result.stopped_by:
        print_line(f"kevin train: the run stopped early at step {result.last_step}: {result.stopped_by}")
    return 0


def register_commands(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a policy with multi-turn GRPO (presets: smoke, h200, paper)",
        description="Multi-turn GRPO training (the Kevin recipe) from a preset and dotted overrides.",
    )
    parser.add_argument(
        "--preset",
        choices=PRESETS,
        default="smoke",
        help="starting config (default: smoke, 2 steps of a tiny model on the CPU)",
    )
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override one field, e.g. loss.clip_high=0.3 or rollout.turns=2 (repeatable)",
    )
    parser.add_argument("--run-dir", help="run directory (default: runs/<preset>-<time>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --run-dir")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.set_defaults(run=_run)
