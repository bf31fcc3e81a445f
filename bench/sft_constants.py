"""Does weighing the constants' tokens teach the warm start to copy them? (issue #16, CPU-sized)

Session 28's warm start wrote another of the op's allowed constants than the prompt's in 16 of its
48 held-out kernels (bench/heldout_errors.py). `SFTConfig.constant_weight` weighs the tokens that
copy a prompt's constants more in the loss (kevin.train.copying). This trains the warm start once
per weight on the learning run's own family and corpus (same counts, seed, draws, prompts), each on
the same batches from the same initial weights, and scores each model on the held-out tasks:

- teacher-forced, every `--val-every` steps (`kevin sft`'s own scores): `val_constants` (share of
  the held-out corpus's constants whose tokens are the argmax) and `val_constant_p` (their mean
  probability);
- sampled at the end: `--samples` completions per held-out task at the RL run's temperature (0.9),
  each read as `bench/heldout_errors.py` reads a held-out kernel: `f right` (the task's elementwise
  function, line for line), `constant` (its ops in order, another constant), `ops`, `no f`.

On this machine's CPU the model and schedule are cut down (`--layers`, `--hidden`, `--steps`,
`--batch-size`); the comparison between weights, at equal steps and batches, is what it measures,
not what the 26M model reaches on the GPU.

    python bench/sft_constants.py --out bench/results/sft_constants_cpu --weights 1,8
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from heldout_errors import CLASSES, classify  # noqa: E402
from learning_run import plan_family  # noqa: E402

from kevin.errors import UsageError  # noqa: E402
from kevin.train import corpus as corpora  # noqa: E402
from kevin.train import family as families  # noqa: E402
from kevin.train import sft  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for report.md, results.json and the runs' logs")
    parser.add_argument("--weights", default="1,8", help="constant weights to compare, comma-separated")
    parser.add_argument("--train-tasks", type=int, default=700)
    parser.add_argument("--heldout-tasks", type=int, default=16)
    parser.add_argument(
        "--rl-tasks", type=int, default=100, help="training combinations kept out of the corpus"
    )
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--val-every", type=int, default=50)
    parser.add_argument("--val-samples", type=int, default=48)
    parser.add_argument("--samples", type=int, default=2, help="sampled completions per held-out task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where to train and sample (cuda: the learning run's 26M model, --layers 8 --hidden 512)",
    )
    parser.add_argument(
        "--constant-draws",
        type=int,
        default=corpora.CONSTANT_DRAWS,
        help=f"copies of each training task with other draws of its constants (default "
        f"{corpora.CONSTANT_DRAWS}, the learning run's)",
    )
    parser.add_argument(
        "--constant-pool",
        choices=families.CONSTANT_POOLS,
        default="narrow",
        help="the family's constants per op (kevin.train.family.CONSTANT_POOLS; default narrow, the run's)",
    )
    parser.add_argument(
        "--constant-form",
        choices=families.CONSTANT_FORMS,
        default="literal",
        help="literal (default: the copying this probe measures) or init (nothing to copy: a control)",
    )
    parser.add_argument("--work", default="/tmp/kevin-sft-constants", help="family and checkpoints (large)")
    args = parser.parse_args(argv)
    try:
        args.weights = [float(w) for w in args.weights.split(",")]
    except ValueError:
        parser.error(f"--weights {args.weights}: give numbers, e.g. 1,8")
    if not args.weights or min(args.weights) <= 0:
        parser.error("--weights: each must be positive")
    if args.constant_draws < 1:
        parser.error(f"--constant-draws {args.constant_draws}: use 1 or more (1: each task as written)")
    return args


def family_and_corpus(args: argparse.Namespace, work: Path):
    """The learning run's family and corpora (bench/learning_run.py's phases, its defaults)."""
    from kevin.train.presets import preset

    specs, rl_ids = plan_family(
        args.seed,
        args.train_tasks,
        args.heldout_tasks,
        args.rl_tasks,
        constant_pool=args.constant_pool,
        constant_form=args.constant_form,
    )
    families.write_family(work / "family", specs, size="large", constant_pool=args.constant_pool)
    specs, train, heldout = families.load_family(work / "family")
    kept_out = set(rl_ids)
    train = [task for task in train if task.id not in kept_out]
    one_shot = preset("h200").rollout.one_shot
    samples = corpora.build_corpus(
        specs,
        train,
        "cuda",
        constant_draws=args.constant_draws,
        constant_pool=args.constant_pool,
        length_cap=corpora.LENGTH_CAP,
        seed=args.seed,
        one_shot=one_shot,
    )
    validation = corpora.build_corpus(specs, heldout, "cuda", one_shot=one_shot)
    return specs, heldout, samples, validation, one_shot


def sample_heldout(
    model_dir: Path, specs, heldout, one_shot: bool, count: int, seed: int, device: str = "cpu"
) -> Counter:
    """`count` completions per held-out task at temperature 0.9, read as heldout_errors reads them."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kevin.rl.env import Sampling
    from kevin.rl.prompts import DEFAULT_TEMPLATES, build_prompt, without_example
    from kevin.train.model import TextCodec
    from kevin.train.policy_hf import HFPolicy

    torch.manual_seed(seed)
    codec = TextCodec(AutoTokenizer.from_pretrained(str(model_dir)))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).to(device).eval()
    policy = HFPolicy(model, codec, device=torch.device(device), batch_size=16 if device == "cpu" else 64)
    templates = DEFAULT_TEMPLATES if one_shot else without_example()
    by_id = {spec.task_id: spec for spec in specs}
    tasks = [task for task in heldout for _ in range(count)]
    prompts = [build_prompt(task, [], backend="cuda", templates=templates).text for task in tasks]
    generations = policy.generate(prompts, Sampling(temperature=0.9, max_tokens=1024))
    return Counter(classify(by_id[task.id], gen.text, False) for task, gen in zip(tasks, generations))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work)
    try:
        specs, heldout, samples, validation, one_shot = family_and_corpus(args, work)
    except UsageError as exc:
        print(f"sft_constants: {exc}", file=sys.stderr)
        return 2
    base = sft.sft_preset("h200")
    model = dataclasses.replace(
        base.model,
        tiny_layers=args.layers,
        tiny_hidden_size=args.hidden,
        tiny_heads=max(1, args.hidden // 64),
        tiny_kv_heads=max(1, args.hidden // 128),
        tiny_intermediate_size=3 * args.hidden,
        device=args.device,
    )
    print(
        f"sft_constants: {len(samples)} training samples, {len(validation)} held-out, weights {args.weights}"
    )
    results = []
    prepared = None  # one tokenizer and encoding for every weight (the marks serve any weight)
    for weight in args.weights:
        config = dataclasses.replace(
            base,
            model=model,
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            time_limit_s=None,
            val_every=args.val_every,
            val_samples=args.val_samples,
            log_every=max(1, args.val_every),
            seed=args.seed,
            constant_weight=weight,
        )
        run_dir = work / f"w{weight:g}"
        started = time.monotonic()
        if prepared is None:
            prepared = sft.prepare(config, samples, marks=True)
        result = sft.train_sft(config, samples, run_dir, prepared=prepared, validation=validation)
        trained_s = time.monotonic() - started
        shutil.copy(run_dir / sft.SFT_LOG, out / f"sft_log_w{weight:g}.jsonl")
        started = time.monotonic()
        counts = sample_heldout(run_dir, specs, heldout, one_shot, args.samples, args.seed, args.device)
        results.append(
            {
                "weight": weight,
                "steps": result.steps,
                "train_s": round(trained_s, 1),
                "sample_s": round(time.monotonic() - started, 1),
                "last_loss": result.losses[-1],
                "val_losses": result.val_losses,
                "val_constants": result.val_constants,
                "sampled": {c: counts[c] for c in CLASSES if c != "passed"},
            }
        )
        print(f"sft_constants: weight {weight:g}: {results[-1]['sampled']}", flush=True)
    write_report(out, args, results, len(samples), len(validation))
    return 0


def write_report(
    out: Path, args: argparse.Namespace, results: list[dict], samples: int, validation: int
) -> None:
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    record = {"args": {k: v for k, v in vars(args).items()}, "commit": commit, "host": platform.node(),
              "training_samples": samples, "validation_samples": validation, "results": results}
    (out / "results.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    heldout = args.heldout_tasks * args.samples
    lines = [
        "# Constant weight in the warm start's loss (bench/sft_constants.py)",
        "",
        f"kevin {commit}, {platform.node()} {args.device}; {samples} training samples (the learning run's "
        f"corpus: {args.train_tasks} tasks less {args.rl_tasks} RL-only, seed {args.seed}, "
        f"{args.constant_draws} constant draws, the {args.constant_pool} pool, constants {args.constant_form}); "
        f"model {args.layers} "
        f"layers x {args.hidden}; {args.steps} steps of {args.batch_size}, lr {args.lr:g}, the same batches "
        "for every weight.",
        "",
        "Teacher-forced on the held-out corpus (constants copied by argmax / their mean probability):",
        "",
        "| step | " + " | ".join(f"weight {r['weight']:g}" for r in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    steps = [step for step, _, _ in results[0]["val_constants"]]
    for index, step in enumerate(steps):
        cells = []
        for r in results:
            _, share, p = r["val_constants"][index]
            loss = dict(r["val_losses"]).get(step)
            cells.append(f"{share:.2f} / {p:.2f} (loss {loss:.3f})")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Sampled at temperature 0.9, {args.samples} per held-out task ({heldout} kernels), read as "
        "bench/heldout_errors.py reads them:",
        "",
        "| weight | " + " | ".join(c for c in CLASSES if c != "passed") + " | train s |",
        "|---|" + "---|" * (len(CLASSES)) ,
    ]
    for r in results:
        cells = " | ".join(str(r["sampled"][c]) for c in CLASSES if c != "passed")
        lines.append(f"| {r['weight']:g} | {cells} | {r['train_s']:.0f} |")
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
