"""How far the learner's updates move the policy, replayed offline from a GPU learning run's records.

Session 20's learning run on the H200 collapsed: held-out correct 0.469 at step 0, 0.062 at step 16,
the policy writing unparseable code by step 14. Its step lines showed importance ratios of 0.002 and
23 on the off-policy gradient steps: each update moved the probabilities of tokens it was not trained
on by orders of magnitude. This bench replays that run's own batches (its episodes file: every
sample's completion and advantage, rebuilt into the learner's samples exactly as the loop does, the
prompt checked against the recorded hash) through `kevin.train.learner.Learner` on the CPU, from the
run's carried checkpoint, once per learning rate, and measures after every step:

    drift       the learner's own k3 KL(old || new) per token on the off-policy gradient step
                (kevin.train.grpo.policy_drift), as the step line prints it
    ratio       the extremes of pi/pi_old on that step (and max |log r|, the step line's drift_max)
    probe nll   mean per-token NLL of a fixed probe set: the start's held-out kernels that passed
                (tasks the policy never trained on), i.e. how much of its kernel writing it lost

No rewards are recomputed: the batches are the run's, so the replay is off-policy after the first
step, and AdamW starts from zero moments (a carried checkpoint is slim). It answers one question:
how large a step the recorded gradients take at each learning rate.

    python3 bench/rl_drift.py --work CARRY_DIR --episodes RUN/episodes.jsonl --heldout \
        RUN/heldout.jsonl --steps 3-10 --lrs 1e-4,3e-5,1e-5 --out bench/results/rl_drift_s20

CARRY_DIR is an unpacked carry of bench/learning_launch.sh (family/, sft/config.json, rl/ with its
tokenizer/, config.json and checkpoints/). Writes drift.json and drift.md under --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from kevin.errors import UsageError  # noqa: E402
from kevin.rl.prompts import build_prompt  # noqa: E402
from kevin.tasks import load_tasks  # noqa: E402
from kevin.tasks.records import content_hash  # noqa: E402
from kevin.train.checkpoint import latest_checkpoint  # noqa: E402
from kevin.train.learner import Learner  # noqa: E402
from kevin.train.logprobs import completion_logprobs  # noqa: E402
from kevin.train.model import TextCodec, load_tokenizer  # noqa: E402
from kevin.train.overrides import load_config  # noqa: E402
from kevin.train.packing import Sample, collate, pack_micro_batches, unalign  # noqa: E402


def read_rows(path: Path) -> list[dict]:
    """A JSONL file's rows (gzipped when its name ends in .gz, as committed results keep episodes)."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def parse_steps(text: str) -> list[int]:
    first, _, last = text.partition("-")
    try:
        return list(range(int(first), int(last or first) + 1))
    except ValueError:
        raise UsageError(f"--steps {text!r}: give a step or a range, e.g. 3-10") from None


class Replay:
    """The run's model, tokenizer and tasks, and its episode rows as the learner's samples."""

    def __init__(self, work: Path, family: Path | None) -> None:
        self.work = work
        self.run_dir = work / "rl"
        if not (self.run_dir / "config.json").is_file():
            raise UsageError(f"{work}: no rl/config.json; pass an unpacked carry of bench/learning_launch.sh")
        self.config = load_config(self.run_dir)
        self.tokenizer = load_tokenizer(self.config.model, self.run_dir)
        self.codec = TextCodec(self.tokenizer)
        tasks = load_tasks(family or work / "family", size=self.config.loop.task_size)
        self.tasks = {task.id: task for task in tasks}
        self.checkpoint = latest_checkpoint(self.run_dir)
        if self.checkpoint is None:
            raise UsageError(f"{self.run_dir}: no checkpoint")

    def model(self) -> torch.nn.Module:
        from transformers import AutoConfig, AutoModelForCausalLM

        architecture = AutoConfig.from_pretrained(self.work / "sft")
        model = AutoModelForCausalLM.from_config(architecture).float()
        state = torch.load(self.checkpoint / "model.pt", map_location="cpu", weights_only=True)
        model.load_state_dict({k: v.float() for k, v in state.items()})
        return model

    def samples(self, rows: list[dict]) -> list[Sample]:
        """The trainable rows as the loop's samples (kevin.train.packing.samples_from_trajectories)."""
        samples = []
        for row in rows:
            if not row.get("trainable") or row.get("advantage") is None or row.get("turn") != 1:
                continue
            prompt = build_prompt(self.tasks[row["task"]], [], backend=self.config.rollout.backend).text
            if content_hash(prompt) != row["prompt_hash"]:
                raise UsageError(f"step {row['step']} task {row['task']}: the rebuilt prompt's hash differs")
            completion = self.codec.encode_completion(row["completion"], row.get("finish_reason"))
            samples.append(
                Sample(
                    prompt_ids=tuple(self.codec.encode_prompt(prompt)),
                    completion_ids=tuple(completion),
                    advantage=float(row["advantage"]),
                    task=row["task"],
                    turn=1,
                    index=len(samples),
                )
            )
        return samples


@torch.no_grad()
def probe_nll(model: torch.nn.Module, probe: list[Sample], pad_id: int, temperature: float) -> float:
    model.eval()
    total, tokens = 0.0, 0
    for group in pack_micro_batches(probe, 16384):
        batch = collate(group, pad_id)
        values = completion_logprobs(model, batch, temperature=temperature, device=torch.device("cpu"))
        for row in unalign(values.float(), batch.samples):
            total -= float(row.sum())
            tokens += row.numel()
    return total / max(tokens, 1)


def replay(
    lr: float, source: Replay, batches: dict[int, list[Sample]], probe: list[Sample], out
) -> list[dict]:
    config = source.config
    model = source.model()
    # The run's schedule with this peak: the same warm-up length, the optimiser step count resumed.
    optim = dataclasses.replace(config.optim, lr=lr)
    learner = Learner(
        model,
        loss=config.loss,
        optim=optim,
        total_optimizer_steps=config.loop.steps * optim.gradient_steps,
        device=torch.device("cpu"),
        pad_id=source.codec.pad_id,
        seed=config.loop.seed,
    )
    state = torch.load(source.checkpoint / "state.pt", map_location="cpu", weights_only=False)
    learner.load_state(state["learner"])
    temperature = config.rollout.temperature
    rows = [{"step": 0, "probe_nll": probe_nll(model, probe, source.codec.pad_id, temperature)}]
    out(f"lr {lr:.0e}: probe nll {rows[0]['probe_nll']:.4f} at the checkpoint")
    for step, samples in sorted(batches.items()):
        started = time.monotonic()
        metrics = learner.learn(
            samples,
            step=step,
            max_completion_tokens=config.rollout.completion_tokens_at(step),
            temperature=temperature,
        )
        row = {
            "step": step,
            "samples": len(samples),
            "trained": metrics.get("samples_trained", 0.0),
            "lr": metrics.get("lr"),
            "drift": metrics.get("drift"),
            "ratio_min": metrics.get("ratio_min"),
            "ratio_max": metrics.get("ratio_max"),
            "clip": (metrics.get("clip_low_frac", 0.0) + metrics.get("clip_high_frac", 0.0)),
            "grad_norm": metrics.get("grad_norm"),
            "probe_nll": probe_nll(model, probe, source.codec.pad_id, temperature),
            "seconds": round(time.monotonic() - started, 1),
        }
        rows.append(row)
        out(
            f"lr {lr:.0e} step {step}: drift {_fmt(row['drift'])} ratio {_fmt(row['ratio_min'])}.."
            f"{_fmt(row['ratio_max'])} probe nll {row['probe_nll']:.4f} ({row['seconds']:.0f} s)"
        )
    return rows


def _fmt(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3g}"


def table(results: dict[str, list[dict]]) -> str:
    lines = [
        "| lr | steps | drift (median / max) | ratio min .. max | max abs(log r) | probe NLL start -> end |",
        "|---|---|---|---|---|---|",
    ]
    for lr, rows in results.items():
        steps = [r for r in rows if r["step"] and r.get("drift") is not None]
        drifts = sorted(r["drift"] for r in steps)
        median = drifts[len(drifts) // 2] if drifts else float("nan")
        low = min((r["ratio_min"] for r in steps), default=float("nan"))
        high = max((r["ratio_max"] for r in steps), default=float("nan"))
        widest = max(math.log(high), -math.log(low)) if low > 0 else math.inf
        lines.append(
            f"| {lr} | {len(steps)} | {_fmt(median)} / {_fmt(max(drifts, default=float('nan')))} | "
            f"{_fmt(low)} .. {_fmt(high)} | {_fmt(widest)} | "
            f"{rows[0]['probe_nll']:.4f} -> {rows[-1]['probe_nll']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="an unpacked carry (family/, sft/, rl/)")
    parser.add_argument(
        "--episodes", type=Path, help="the episodes to replay (default: WORK/rl/episodes.jsonl)"
    )
    parser.add_argument(
        "--heldout", type=Path, help="held-out rows for the probe (default: WORK/rl/heldout.jsonl)"
    )
    parser.add_argument("--family", type=Path, help="the family's task folder (default: WORK/family)")
    parser.add_argument("--steps", default="3-10", help="the recorded steps to replay, e.g. 3-10")
    parser.add_argument("--lrs", default="1e-4,3e-5,1e-5", help="peak learning rates, comma-separated")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        lrs = [float(v) for v in args.lrs.split(",") if v]
    except ValueError:
        print(f"rl_drift: --lrs {args.lrs!r}: give numbers, e.g. 1e-4,1e-5", file=sys.stderr)
        return 2
    try:
        steps = parse_steps(args.steps)
        source = Replay(args.work, args.family)
        episodes = read_rows(args.episodes or source.run_dir / "episodes.jsonl")
        heldout = read_rows(args.heldout or source.run_dir / "heldout.jsonl")
        by_step: dict[int, list[dict]] = defaultdict(list)
        for row in episodes:
            if row["step"] in steps:
                by_step[row["step"]].append(row)
        missing = [s for s in steps if s not in by_step]
        if missing:
            raise UsageError(f"no episodes of step(s) {missing} in the episodes file")
        batches = {step: source.samples(rows) for step, rows in by_step.items()}
        start = [r for r in heldout if r["step"] == 0 and r.get("verdict", {}).get("correct")]
        if not start:
            raise UsageError("no passed held-out row at step 0 to probe with")
        probe = source.samples([{**r, "trainable": True, "advantage": 0.0} for r in start])
    except UsageError as error:
        print(f"rl_drift: {error}", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for lr in lrs:
        results[f"{lr:g}"] = replay(lr, source, batches, probe, lambda line: print(line, flush=True))
        (args.out / "drift.json").write_text(json.dumps(results, indent=1) + "\n")
    report = table(results)
    (args.out / "drift.md").write_text(
        f"Replayed steps {args.steps} of {args.episodes or 'the carry'} from {source.checkpoint.name}; "
        f"probe: {len(probe)} passed held-out kernels of step 0.\n\n{report}"
    )
    print(report, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
