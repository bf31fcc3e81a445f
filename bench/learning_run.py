"""The learning run of issue #16 in one command: a small model made here learns to write faster
kernels from real GPU rewards, judged on held-out tasks before and after.

Launches on the GPU machine (one H200, from the repository root; torch and transformers already
there, no network, nothing to download). One launch does not fit a device call (10 minutes), so
the run is split into launches on the same machine, kept warm between them (bench/learning_launch.sh):

    PYTHONPATH=. python3 bench/learning_run.py --out $OUT/l1 --work /tmp/kevin-learn --budget-s 500
    PYTHONPATH=. python3 bench/learning_run.py --out $OUT/l2 --work /tmp/kevin-learn --budget-s 500 --resume

Phases of the first launch (its budget covers them all; a watchdog ends the process at budget +
40 s and still writes what it has):

    family     600 training and 8 held-out tasks (kevin.train.family, --train-tasks,
               --heldout-tasks) at the GPU size; held-out tasks are op combinations never seen in training; --rl-tasks N
               keeps N training combinations out of the corpus as the RL phase's only tasks
               (`split_rl.json`), so that RL rewards reading a prompt the warm start never
               memorised, as the held-out tasks need                                     ~1 s
    corpus     every kernel variant of the training tasks as (prompt, completion) samples, each
               task also with 2 other draws of its constants (--constant-draws 3), the rare
               chain lengths of a kind repeated up to 8x (--length-cap), and 2 variants
               drawn per held-out task for the baseline (kevin.train.corpus)            ~5 s
    baseline   the corpus-average baseline: those held-out variants evaluated on the GPU, as
               the policy's kernels are (also times the held-out references, which the later
               evaluations reuse, and builds the evaluator's shim unless the cache holds it:
               ~100 s of a cold start in session 9); the tokenizer is trained and the corpus
               encoded meanwhile                                          --baseline-s, 30-130 s
    sft        the warm start (kevin.train.sft): a 26M-parameter Llama from scratch on the
               training corpus, bf16                                         --sft-s, ~170 s
    rl         `kevin train --preset h200` from that checkpoint on the family (real cuda
               rewards, 100 ms timing budget, 12 candidates in flight): held-out evaluation at
               step 0 (the SFT start), steps of 2 tasks x 8 trajectories x 1 turn, held-out
               evaluation every 4 steps and at the end of each launch; loop.time_limit_s stops it
               at a step boundary so that evaluation and the checkpoint still fit      the rest
    report     metrics.json, learning.png (held-out correct and speedup over the steps, the SFT
               start and the corpus average), the RL run's curves.png, and a table   ~5 s

Across sessions (a new machine, /tmp gone): the last launch's --carry-out DIR writes the work
folder as parts small enough to come back from a device call (bench/learning_carry.py: bf16
weights, no optimiser state), and the next session's first launch takes them with --carry-in DIR.

A later launch (--resume) reads record.json in --work, restores the RL run's last checkpoint
(model, optimiser, sampler, RNG: `kevin train --resume`), runs steps until its own budget, and
writes the whole report again: the last launch's --out holds the run's every point.

Outputs in --out (small files only): metrics.json, learning.png, table.txt, corpus_stats.json,
corpus_sample.jsonl, corpus_baseline.jsonl, sft_log.jsonl, sft.json, and rl/ (config.json,
metrics.jsonl, heldout.jsonl, curves.png, episodes_sample.jsonl). Checkpoints (about 100 MB of
weights, 300 MB with the optimiser) stay in --work (default: a new folder under /tmp), so $OUT
carries only what is worth committing.

What this shows and what it does not: a 26M-parameter model, warm-started on kernels this project
generates, improves by RL on one narrow family of elementwise / reduction / softmax tasks with
rewards from compiling, checking and timing its kernels on the GPU. It is not a 32B model writing
arbitrary kernels, and a few minutes of RL mostly teach it which of the corpus's ways of writing a
kernel to pick (fewer wrong and slow variants), not new algorithms.

CPU dry run (tests/train/test_learning_run.py): `--scale toy --backend cpp` runs every phase with
a tiny model in seconds to minutes; the test may also swap in a fake evaluator.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import learning_carry  # noqa: E402  (bench/ is on the path from here on)
from learning_report import HEADLINE, write_report  # noqa: E402

from kevin.errors import UsageError  # noqa: E402
from kevin.evaluator.result import EvalResult  # noqa: E402
from kevin.rl.metrics import compute_metrics  # noqa: E402
from kevin.train import corpus as corpora  # noqa: E402
from kevin.train import family as families  # noqa: E402
from kevin.train import presets, sft  # noqa: E402
from kevin.train.config import TrainConfig  # noqa: E402
from kevin.train.overrides import apply_overrides  # noqa: E402

RECORD_FILE = "record.json"
RL_SPLIT_FILE = "split_rl.json"
"""The RL phase's split with --rl-tasks: those tasks to train on, the held-out ones to evaluate."""
REPORT_RESERVE_S = 35.0
"""Budget kept back from the RL loop for its setup, teardown and the report."""
TOY_TRAIN = {"act": 10, "rowreduce": 1, "softmax": 1}
"""Eight single-op tasks, two chains (what --rl-tasks draws from), a plain row sum, a plain softmax."""
TOY_HELDOUT = {"act": 1, "softmax": 1}


def toy_rl() -> TrainConfig:
    """The CPU dry run's RL config: the smoke preset's tiny scale on the toy family."""
    base = presets.smoke()
    return dataclasses.replace(
        base,
        preset="learning-toy",
        rollout=dataclasses.replace(
            base.rollout, tasks_per_step=2, trajectories=2, turns=1, max_completion_tokens=32
        ),
        loop=dataclasses.replace(
            base.loop,
            steps=2,
            eval_every=1,
            eval_at_start=True,
            eval_trajectories=2,
            eval_turns=1,
            tensorboard=False,
        ),
    )


def plan_family(
    seed: int,
    train_tasks: int,
    heldout_tasks: int,
    rl_tasks: int,
    *,
    toy: bool = False,
    constant_pool: str = "narrow",
    constant_form: str = "literal",
) -> tuple[list[families.TaskSpec], list[str]]:
    """The run's family specs (the toy's fixed counts with `toy`) and the ids of its RL-only tasks
    (training combinations kept out of the warm-start corpus); bench/sft_constants.py uses it too."""
    held = TOY_HELDOUT if toy else families.heldout_counts(heldout_tasks)
    specs = families.generate_family(
        seed,
        train_counts=TOY_TRAIN if toy else families.train_counts(train_tasks, held),
        heldout_counts=held,
        constant_pool=constant_pool,
        constant_form=constant_form,
    )
    return specs, families.rl_only_ids(specs, rl_tasks, seed) if rl_tasks else []


def toy_sft() -> sft.SFTConfig:
    base = sft.sft_preset("smoke")
    model = dataclasses.replace(base.model, tiny_layers=1, tiny_hidden_size=32, tiny_intermediate_size=64)
    return dataclasses.replace(base, model=model, steps=4, batch_size=2, log_every=2)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Watchdog:
    """Ends the process at the deadline, after writing the report from what is on disk."""

    def __init__(self, deadline_s: float, report) -> None:
        self.done = threading.Event()
        self.timer = threading.Timer(deadline_s, self._fire, args=(report,))
        self.timer.daemon = True

    def start(self) -> None:
        self.timer.start()

    def _fire(self, report) -> None:
        if self.done.is_set():
            return
        print("learning_run: the watchdog ends the run at its deadline; writing what there is", flush=True)
        try:
            report(partial="watchdog")
        finally:
            os._exit(3)


class LearningRun:
    def __init__(self, args: argparse.Namespace, evaluator_factory=None) -> None:
        if args.rl_tasks < 0:
            raise UsageError(f"--rl-tasks {args.rl_tasks}: use 0 (none) or more")
        if args.sft_steps is not None and args.sft_steps < 1:
            raise UsageError(f"--sft-steps {args.sft_steps}: use 1 or more (or leave it out: the preset's)")
        sft.check_corpus_arguments(args)
        self.args = args
        self.out = Path(args.out)
        self.work = Path(args.work or tempfile.mkdtemp(prefix="kevin-learning-"))
        self.started = time.monotonic()
        self.phases: dict[str, float] = {}
        self.record: dict = {"budget_s": args.budget_s, "scale": args.scale, "backend": args.backend}
        self.evaluator_factory = evaluator_factory
        self.kept = self.work / "report"
        """Small outputs of the phases (family, baseline, corpus, SFT), copied into --out by every
        launch's report."""
        self.resuming = bool(args.resume or args.carry_in)
        carried = None
        if args.carry_in:
            carried = learning_carry.unpack(Path(args.carry_in), self.work)
            print(f"learning_run: carried in {carried['checkpoint']} ({carried['bytes'] / 2**20:.1f} MiB)", flush=True)
        if self.resuming:
            path = self.work / RECORD_FILE
            if not path.is_file():
                raise UsageError(
                    f"--resume: no {RECORD_FILE} in {self.work}: the first launch has not finished its "
                    "warm start there; start without --resume"
                )
            self.record = {**json.loads(path.read_text(encoding="utf-8")), "budget_s": args.budget_s}
        if carried is not None:
            self.record.setdefault("carries", []).append(carried["checkpoint"])

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def phase(self, name: str, since: float) -> None:
        self.phases[name] = round(time.monotonic() - since, 2)
        print(
            f"learning_run: {name} done in {self.phases[name]:.1f} s (at {self.elapsed():.0f} s)", flush=True
        )

    # -- phases --------------------------------------------------------------------------------

    def write_family(self):
        """The family (written by the first launch), and its RL-only tasks (--rl-tasks: training
        combinations kept out of the corpus, the RL phase's whole training split, `split_rl.json`)."""
        full = self.args.scale == "full"
        directory = self.work / "family"
        rl_only = self.record.get("family", {}).get("rl_only", 0) if self.resuming else self.args.rl_tasks
        if self.resuming and self.args.rl_tasks not in (0, rl_only):
            raise UsageError(
                f"--rl-tasks {self.args.rl_tasks}: the run in {self.work} has {rl_only}; resume without it"
            )
        if not self.resuming:
            specs, rl_ids = plan_family(
                self.args.seed,
                self.args.train_tasks,
                self.args.heldout_tasks,
                rl_only,
                toy=not full,
                constant_pool=self.args.constant_pool,
                constant_form=self.args.constant_form,
            )
            size = "large" if self.args.backend == "cuda" else "small"
            families.write_family(directory, specs, size=size, constant_pool=self.args.constant_pool)
            if rl_ids:
                split = {"train": rl_ids, "holdout": [s.task_id for s in specs if s.heldout]}
                (directory / RL_SPLIT_FILE).write_text(json.dumps(split, indent=2) + "\n", encoding="utf-8")
                shutil.copy(directory / RL_SPLIT_FILE, self.kept / RL_SPLIT_FILE)
            shutil.copy(directory / families.SPLIT_FILE, self.kept / "split.json")
            shutil.copy(directory / families.SPEC_FILE, self.kept / "family.json")
        specs, train, heldout = families.load_family(directory)
        self.rl_split = directory / (RL_SPLIT_FILE if rl_only else families.SPLIT_FILE)
        if rl_only:
            rl_ids = set(json.loads(self.rl_split.read_text(encoding="utf-8"))["train"])
            train = [task for task in train if task.id not in rl_ids]  # the corpus's tasks
        self.record["family"] = {
            "train": len(train),
            "heldout": len(heldout),
            "rl_only": rl_only,
            "size": "large" if self.args.backend == "cuda" else "small",
        }
        return directory, specs, train, heldout

    def start_baseline(self, specs, heldout):
        """Submit the held-out corpus variants; returns (evaluator, picks, futures). With
        --baseline-from the futures are None: the earlier run's verdicts stand in for them."""
        picks = corpora.corpus_baseline_picks(
            specs, heldout, self.args.backend, per_task=self.args.baseline_per_task, seed=self.args.seed
        )
        evaluator = self.evaluator_factory() if self.evaluator_factory else self.real_evaluator()
        if self.args.baseline_from:
            self.reused_rows = self.reused_baseline(specs, picks)  # refused before minutes of SFT
            return evaluator, picks, None
        futures = [evaluator.submit(task, variant.source) for task, variant in picks]
        return evaluator, picks, futures

    def reused_baseline(self, specs, picks) -> list[dict]:
        """The verdicts of an earlier run's baseline (its report folder: corpus_baseline.jsonl beside
        family.json), refused unless they are the verdicts of these very kernels: the same held-out
        specs (ops, constants, shapes) and the same picks in the same order, and, where the earlier
        rows recorded it, the same source. The baseline depends on nothing else, so a fresh run on
        the same seed skips its GPU evaluations (s16: ~110 s of a 30-minute session)."""
        folder = Path(self.args.baseline_from)
        rows_file, spec_file = folder / "corpus_baseline.jsonl", folder / families.SPEC_FILE
        if not rows_file.is_file() or not spec_file.is_file():
            raise UsageError(
                f"--baseline-from {folder}: no corpus_baseline.jsonl and {families.SPEC_FILE} there; "
                "pass an earlier learning run's --out or report folder"
            )
        earlier = {spec.task_id: spec for spec in families.read_family(folder)}
        mine = {spec.task_id: spec for spec in specs}
        rows = [json.loads(line) for line in rows_file.read_text(encoding="utf-8").splitlines() if line.strip()]
        wanted = [(task.id, variant.name) for task, variant in picks]
        if len(rows) != len(wanted):
            raise UsageError(
                f"--baseline-from {folder}: it holds {len(rows)} verdicts and this run picks {len(wanted)} "
                "kernels (an unfinished baseline, or another --heldout-tasks or --baseline-per-task); run without it"
            )
        if [(row["task"], row["variant"]) for row in rows] != wanted:
            raise UsageError(
                f"--baseline-from {folder}: its baseline evaluated other kernels than this run picks "
                "(another seed, --heldout-tasks or --baseline-per-task); run without it"
            )
        for (task, variant), row in zip(picks, rows):
            other = earlier.get(task.id)
            if other is None or other.to_dict() != mine[task.id].to_dict():
                raise UsageError(
                    f"--baseline-from {folder}: held-out task {task.id} differs there; run without it"
                )
            if row.get("source_sha", _sha(variant.source)) != _sha(variant.source):
                raise UsageError(
                    f"--baseline-from {folder}: {task.id} {variant.name} was another kernel there; run without it"
                )
        timed_on = {str(row["verdict"].get("device") or "") for row in rows} - {""}
        here = self.device_name()
        if timed_on and here and timed_on != {here}:
            # s34: the same kernels read +0.14 in speedup on an H100 against the H200's.
            raise UsageError(
                f"--baseline-from {folder}: its baseline was timed on {', '.join(sorted(timed_on))} and "
                f"this machine is {here}, so its speedups are not this run's corpus average; run without it"
            )
        return rows

    def device_name(self) -> str:
        """What this run's verdicts will name as their device ("cpu" on the cpp back end; "" where
        no GPU can be asked, which checks nothing)."""
        if self.args.backend != "cuda":
            return "cpu"
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else ""

    def real_evaluator(self):
        from kevin.train.rollout import build_evaluator

        return build_evaluator(self.base_config().evaluator, self.args.backend)

    def finish_baseline(self, picks, futures, timeout_s: float) -> None:
        if futures is None:
            self.write_baseline(self.reused_rows, missing=0)
            self.record["corpus_average"]["reused_from"] = str(self.args.baseline_from)
            return
        deadline = time.monotonic() + timeout_s
        rows, missing = [], 0
        for index, ((task, variant), future) in enumerate(zip(picks, futures)):
            try:
                result = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                missing += 1
                continue
            except Exception as exc:  # the evaluator itself failed: ours, not the variant's
                result = EvalResult(
                    stage="runtime", blame="infrastructure", error=str(exc)[:500], task_id=task.id
                )
            verdict = result.to_dict()
            verdict.pop("log", None)
            rows.append(
                {
                    "step": 0,
                    "task": task.id,
                    "trajectory": index,
                    "turn": 1,
                    "variant": variant.name,
                    "label": variant.label,
                    "source_sha": _sha(variant.source),
                    "verdict": verdict,
                }
            )
        self.write_baseline(rows, missing)

    def write_baseline(self, rows: list[dict], missing: int) -> None:
        with (self.kept / "corpus_baseline.jsonl").open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
        summary = compute_metrics(rows, ks=[1])["overall"] if rows else {}
        self.record["corpus_average"] = {
            **{k: summary.get(k) for k in (*HEADLINE, "geomean")},
            "variants": len(rows),
            "not_finished": missing,
            "infrastructure": sum(r["verdict"]["blame"] == "infrastructure" for r in rows),
            "by_label": {
                label: {
                    "variants": sum(r["label"] == label for r in rows),
                    "passed": sum(
                        r["label"] == label and EvalResult.from_dict(r["verdict"]).passed for r in rows
                    ),
                }
                for label in ("honest", "slow", "wrong")
            },
        }

    def sft_config(self) -> sft.SFTConfig:
        config = sft.sft_preset("h200") if self.args.scale == "full" else toy_sft()
        steps = self.args.sft_steps or config.steps
        weight = self.args.constant_weight or config.constant_weight
        return dataclasses.replace(
            config, seed=self.args.seed, time_limit_s=self.args.sft_s, steps=steps, constant_weight=weight
        )

    def base_config(self) -> TrainConfig:
        """The RL config before the run's own paths: the preset, the back end, --set."""
        base = presets.h200() if self.args.scale == "full" else toy_rl()
        overrides = [f"rollout.backend={self.args.backend}", f"loop.seed={self.args.seed}"]
        if self.args.cache_dir:
            overrides.append(f"evaluator.cache_dir={self.args.cache_dir}")
        return apply_overrides(base, overrides + list(self.args.set or []))

    def rl_config(self, checkpoint: Path, family_dir: Path, time_limit_s: float) -> TrainConfig:
        overrides = [
            f"model.name_or_path={checkpoint}",
            f"loop.tasks={family_dir}",
            f"loop.split={self.rl_split}",
            f"loop.time_limit_s={max(1.0, time_limit_s):.0f}",
        ]
        return apply_overrides(self.base_config(), overrides)

    def run_rl(self, checkpoint: Path, family_dir: Path, evaluator) -> None:
        from kevin.train.checkpoint import latest_checkpoint
        from kevin.train.loop import print_line, train

        limit = self.args.budget_s - self.elapsed() - REPORT_RESERVE_S
        config = self.rl_config(checkpoint, family_dir, limit)
        run_dir = self.work / "rl"
        resume = latest_checkpoint(run_dir) is not None
        result = train(
            config, run_dir, resume=resume, evaluator_factory=lambda run: evaluator, out=print_line
        )
        self.record["rl"] = {
            "steps": result.last_step,
            "stopped_by": result.stopped_by,
            "time_limit_s": round(limit),
        }
        self.record.setdefault("launches", []).append(
            {"resumed": resume, "last_step": result.last_step, "time_limit_s": round(limit)}
        )

    # -- the whole run -------------------------------------------------------------------------

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        self.kept.mkdir(parents=True, exist_ok=True)
        watchdog = Watchdog(self.args.budget_s + self.args.grace_s - self.elapsed(), self.report)
        watchdog.start()
        since = time.monotonic()
        family_dir, specs, train_tasks, heldout = self.write_family()
        if self.resuming:
            # Family, baseline and warm start are done: this launch only continues the RL run.
            self.save_record()
            self.run_rl(self.work / "sft", family_dir, self.real_evaluator())
            self.phase(f"rl (launch {len(self.record['launches'])})", since)
            return self.finish(watchdog)
        one_shot = self.base_config().rollout.one_shot  # the corpus's prompts are the RL run's
        constant_pool = families.read_constant_pool(family_dir)
        samples = corpora.build_corpus(
            specs,
            train_tasks,
            self.args.backend,
            constant_draws=self.args.constant_draws,
            length_cap=self.args.length_cap,
            seed=self.args.seed,
            one_shot=one_shot,
            constant_pool=constant_pool,
        )
        self.phase("family+corpus", since)
        since = time.monotonic()
        evaluator, picks, futures = self.start_baseline(specs, heldout)
        config = self.sft_config()
        prepared = sft.prepare(config, samples)
        stats = corpora.corpus_stats(samples, prepared.completion_tokens, prepared.prompt_tokens)
        (self.kept / "corpus_stats.json").write_text(json.dumps(stats, indent=2) + "\n")
        corpora.write_corpus(samples[:: max(1, len(samples) // 12)], self.kept / "corpus_sample.jsonl")
        self.record["corpus"] = {
            **stats,
            "constant_draws": self.args.constant_draws,
            "constant_pool": constant_pool,
            "constant_form": self.args.constant_form,
            "length_cap": self.args.length_cap,
            "one_shot": one_shot,
        }
        self.finish_baseline(picks, futures, self.args.baseline_s)
        self.phase("baseline", since)
        since = time.monotonic()
        validation = corpora.build_corpus(specs, heldout, self.args.backend, one_shot=one_shot)
        result = sft.train_sft(config, samples, self.work / "sft", prepared=prepared, validation=validation)
        for name in (sft.SFT_LOG, sft.SFT_RECORD):
            shutil.copy(self.work / "sft" / name, self.kept / name)
        self.record["sft"] = {
            "steps": result.steps,
            "seconds": round(result.seconds, 1),
            "parameters": result.parameters,
            "first_loss": result.losses[0],
            "last_loss": result.losses[-1],
            "val_losses": result.val_losses,
            "val_constants": result.val_constants,
        }
        self.phase("sft", since)
        prebuild = getattr(evaluator, "prebuild", None)  # the real service's, started with it
        if prebuild is not None:
            state = prebuild.result()[1] if prebuild.done() else "still building"
            print(f"learning_run: the evaluator's toolchain (built during SFT): {state}", flush=True)
        self.save_record()
        since = time.monotonic()
        self.run_rl(self.work / "sft", family_dir, evaluator)
        self.phase("rl", since)
        return self.finish(watchdog)

    def finish(self, watchdog: Watchdog) -> int:
        """The report, then (--carry-out) the parts the next session's machine resumes from,
        written whole into a temporary folder and renamed, so a collector sees all or none."""
        watchdog.done.set()
        self.report()
        if self.args.carry_out:
            target = Path(self.args.carry_out)
            staging = target.with_name(target.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            parts = learning_carry.pack(self.work, staging)
            size = sum(p.stat().st_size for p in parts) / 2**20
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
            print(f"learning_run: carry-out {len(parts)} parts, {size:.1f} MiB in {target}", flush=True)
        return 0

    def save_record(self) -> None:
        """The record so far, in the work folder: a later launch (--resume) starts from it."""
        (self.work / RECORD_FILE).write_text(json.dumps(self.record, indent=2) + "\n", encoding="utf-8")

    # -- the report ----------------------------------------------------------------------------

    def report(self, partial: str | None = None) -> None:
        self.record["phases_s"] = {**self.record.get("phases_s", {}), **self.phases}
        self.record["wall_s"] = round(self.record.get("earlier_wall_s", 0.0) + self.elapsed(), 1)
        self.record["partial"] = partial
        for path in self.kept.iterdir():
            shutil.copy(path, self.out / path.name)
        write_report(self.record, self.work / "rl", self.out)
        if partial is None:
            self.record["earlier_wall_s"] = self.record["wall_s"]
            self.save_record()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the results (small files)")
    parser.add_argument("--work", help="folder for checkpoints and the family (default: a new one in /tmp)")
    parser.add_argument("--budget-s", type=float, default=480.0, help="wall-clock budget of the whole run")
    parser.add_argument(
        "--grace-s", type=float, default=40.0, help="the watchdog ends the process this long after the budget"
    )
    parser.add_argument("--sft-s", type=float, default=170.0, help="most seconds of SFT training")
    parser.add_argument(
        "--sft-steps",
        type=int,
        help="SFT steps (default: the preset's, 1600 at full scale; the rate decays over them). s28: the "
        "held-out corpus loss still fell at 1600 (0.0236 at 1000, 0.0155 at 1600) and a third of the "
        "start's held-out kernels had a constant that was not the prompt's; give --sft-s room for them",
    )
    parser.add_argument(
        "--baseline-s", type=float, default=90.0, help="most seconds to wait for the baseline"
    )
    parser.add_argument(
        "--baseline-from",
        metavar="DIR",
        help="reuse the corpus-average baseline of an earlier run on the same seed and held-out tasks "
        "(its --out or report folder); refused unless it evaluated the same kernels",
    )
    parser.add_argument("--baseline-per-task", type=int, default=2, help="corpus variants per held-out task")
    sft.add_corpus_arguments(parser)
    parser.add_argument(
        "--train-tasks", type=int, default=600, help="training tasks of the family (full scale; 8 held out; 120 memorised, s10)"
    )
    parser.add_argument(
        "--heldout-tasks",
        type=int,
        default=8,
        help="held-out tasks of the family (full scale; kevin.train.family.heldout_counts): 16 with "
        "--set loop.eval_trajectories=2 measures the same budget on twice the unseen combinations",
    )
    parser.add_argument(
        "--rl-tasks",
        type=int,
        default=0,
        help="training combinations kept out of the SFT corpus, the RL phase's only tasks (0: RL on the "
        "corpus's own tasks, sessions 10-15; kevin.train.family.rl_only_ids)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --work (a later launch: RL from its last checkpoint, then the report)",
    )
    parser.add_argument(
        "--carry-in",
        metavar="DIR",
        help="start from the parts an earlier session's --carry-out wrote (into an empty --work), then resume",
    )
    parser.add_argument(
        "--carry-out",
        metavar="DIR",
        help="at the end, write the work folder as parts for a later session (bench/learning_carry.py)",
    )
    parser.add_argument(
        "--constant-pool",
        choices=families.CONSTANT_POOLS,
        default="narrow",
        help="the family's constants per op: narrow (3-5, sessions 10-37) or wide (30-60: a constant is "
        "right only when copied from the prompt; kevin.train.family.WIDE_CONSTANTS)",
    )
    parser.add_argument(
        "--constant-form",
        choices=families.CONSTANT_FORMS,
        default="init",
        help="how tasks carry their constants (kevin.train.family.CONSTANT_FORMS): init (default since "
        "s40: the Model's constructor arguments, read by the kernel from K) or literal (written in the "
        "forward and copied into the kernel, sessions 10-39: the warm start never learned to copy them)",
    )
    parser.add_argument("--scale", choices=("full", "toy"), default="full", help="toy: the CPU dry run")
    parser.add_argument("--backend", choices=("cuda", "cpp"), default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cache-dir", default="", help="evaluator build/baseline cache (default ~/.cache/kevin)"
    )
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="override an RL config field")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, evaluator_factory=None) -> int:
    try:
        return LearningRun(parse_args(argv), evaluator_factory).run()
    except UsageError as exc:
        print(f"learning_run: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
