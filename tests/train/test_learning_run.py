"""bench/learning_run.py on the CPU at toy scale: every phase and every output file (with a fake
evaluator, and slow: with the real cpp back end); the loop's time limit; the watchdog."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from train_helpers import CyclingPolicy, FakeEvaluator, load_bench, tasks, tiny_config

from kevin.evaluator.result import EvalResult
from kevin.train.loop import train

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "learning_run.py"


learning_run = load_bench("learning_run_bench", "learning_run.py")


class PassingEvaluator(FakeEvaluator):
    """Every candidate correct at speedup 1.25 (the dry run checks plumbing, not kernels)."""

    def __init__(self) -> None:
        super().__init__(
            lambda task, source: EvalResult(
                stage="ok", compiled=True, correct=True, speedup=1.25, task_id=task.id
            )
        )


def test_toy_dry_run_writes_every_output(tmp_path, capsys):
    out = tmp_path / "learn"
    argv = ["--out", str(out), "--work", str(tmp_path / "work"), "--scale", "toy", "--backend", "cpp"]
    argv += ["--budget-s", "300", "--baseline-per-task", "2"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1].startswith("phases (s): family+corpus")
    assert any(line.startswith("corpus average variant") for line in printed[-12:])
    for name in (
        "metrics.json", "table.txt", "learning.png", "corpus_stats.json", "corpus_sample.jsonl",
        "corpus_baseline.jsonl", "sft_log.jsonl", "sft.json", "split.json", "family.json",
        "rl/config.json", "rl/metrics.jsonl", "rl/heldout.jsonl", "rl/curves.png", "rl/episodes_sample.jsonl",
    ):  # fmt: skip
        assert (out / name).exists(), name
    record = json.loads((out / "metrics.json").read_text())
    assert record["family"] == {"train": 12, "heldout": 2, "rl_only": 0, "size": "small"}
    assert record["corpus_average"]["variants"] == 4 and record["corpus_average"]["correct"] == 1.0
    assert record["corpus_average"]["speedup"] == pytest.approx(1.25)
    assert record["before"]["step"] == 0 and record["after"]["step"] == record["rl"]["steps"] == 2
    assert record["sft"]["steps"] == 4 and record["partial"] is None
    # how well the warm start copies the held-out prompts' constants (a third of s28's failures) is
    # recorded; the toy's two held-out tasks have none (tests/train/test_sft.py scores some)
    assert record["sft"]["val_constants"] == []
    assert record["corpus"]["constant_draws"] == 3  # the default: each task with 3 draws of its constants
    assert record["corpus"]["length_cap"] == 8  # and a rare chain length's tasks up to 8x
    assert record["corpus"]["one_shot"] is True  # the toy's RL prompts carry the example, so its corpus's do
    assert set(record["phases_s"]) == {"family+corpus", "baseline", "sft", "rl"}
    assert len(record["training"]) == 2
    # Each held-out step after the start, paired with it (bench/heldout_paired.py): the toy's last
    # held-out evaluation against step 0, every kernel passing at 1.25 both times.
    paired = record["paired"][-1]
    assert (paired["step"], paired["base"], paired["gained"], paired["lost"]) == (2, 0, 0, 0)
    assert paired["speedup_diff"] == 0.0 and paired["pairs"] > 0
    assert "pair by pair" in (out / "table.txt").read_text()
    config = json.loads((out / "rl" / "config.json").read_text())
    assert config["model"]["name_or_path"].endswith("sft") and config["loop"]["time_limit_s"] > 0
    assert not list(out.rglob("*.safetensors")), "weights stay in the work folder"
    assert (tmp_path / "work" / "sft" / "model.safetensors").exists()


def test_a_resumed_launch_continues_the_rl_run_and_reports_every_point(tmp_path, capsys):
    work = tmp_path / "work"
    common = ["--work", str(work), "--scale", "toy", "--backend", "cpp", "--budget-s", "300"]
    common += ["--baseline-per-task", "1", "--set", "loop.stop_after_steps=1"]
    assert (
        learning_run.main(["--out", str(tmp_path / "l1"), *common], evaluator_factory=PassingEvaluator) == 0
    )
    first = json.loads((tmp_path / "l1" / "metrics.json").read_text())
    assert first["rl"]["steps"] == 1 and [p["step"] for p in first["heldout"]] == [0, 1]
    sft_mtime = (work / "sft" / "model.safetensors").stat().st_mtime
    capsys.readouterr()
    argv = ["--out", str(tmp_path / "l2"), *common, "--resume"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    assert "sft" not in capsys.readouterr().out.split("kevin train:")[0], "the warm start is not redone"
    assert (work / "sft" / "model.safetensors").stat().st_mtime == sft_mtime
    second = json.loads((tmp_path / "l2" / "metrics.json").read_text())
    assert second["rl"]["steps"] == 2 and [p["step"] for p in second["heldout"]] == [0, 1, 2]
    assert [launch["resumed"] for launch in second["launches"]] == [False, True]
    assert second["corpus_average"] == first["corpus_average"] and second["sft"] == first["sft"]
    assert second["wall_s"] > first["wall_s"]
    for name in ("corpus_baseline.jsonl", "sft.json", "family.json", "learning.png", "rl/metrics.jsonl"):
        assert (tmp_path / "l2" / name).exists(), name


def test_a_run_carried_to_a_new_work_folder_continues_from_its_checkpoint(tmp_path, capsys):
    # Across device sessions: the first session's last launch writes parts (--carry-out), the next
    # session's machine starts from them in an empty folder (--carry-in) and the history goes on.
    import learning_carry
    import torch

    common = ["--scale", "toy", "--backend", "cpp", "--budget-s", "300", "--baseline-per-task", "1"]
    common += ["--set", "loop.stop_after_steps=1"]
    carry = tmp_path / "carry"
    first_work = tmp_path / "machine1"
    argv = ["--out", str(tmp_path / "l1"), "--work", str(first_work), "--carry-out", str(carry), *common]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    parts = sorted(p.name for p in carry.iterdir())
    assert parts and all(name.startswith(learning_carry.PART_PREFIX) for name in parts)
    assert not (tmp_path / "carry.partial").exists()
    capsys.readouterr()
    second_work = tmp_path / "machine2"
    argv = ["--out", str(tmp_path / "l2"), "--work", str(second_work), "--carry-in", str(carry), *common]
    argv += ["--set", "loop.eval_at_resume=true"]  # a launch field: the carried config still matches
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    output = capsys.readouterr().out
    assert "carried in step_000001" in output and "kevin sft" not in output
    # step 1 judged again on this machine, and step 2 paired with it in the report
    assert "step 1 held-out again on this machine" in output
    assert (tmp_path / "l2" / "rl" / "heldout_resumed.jsonl").is_file()
    assert "against step 1 evaluated again on this launch's machine:" in (tmp_path / "l2" / "table.txt").read_text()
    second = json.loads((tmp_path / "l2" / "metrics.json").read_text())
    assert second["rl"]["steps"] == 2 and [p["step"] for p in second["heldout"]] == [0, 1, 2]
    assert second["carries"] == ["step_000001"] and [x["resumed"] for x in second["launches"]] == [False, True]
    assert "carried to a new machine at step_000001" in (tmp_path / "l2" / "table.txt").read_text()
    # the second machine's run started from the first one's step-1 weights (bf16-rounded)
    first_weights = torch.load(first_work / "rl" / "checkpoints" / "step_000001" / "model.pt", weights_only=True)
    from safetensors.torch import load_file

    start = load_file(str(second_work / "sft" / "model.safetensors"))
    for name, value in first_weights.items():
        assert torch.equal(start[name], value.to(torch.bfloat16).float()), name


def test_carry_parts_split_and_join_and_refuse_bad_folders(tmp_path):
    import learning_carry

    from kevin.errors import UsageError

    work = tmp_path / "work"
    (work / "rl" / "checkpoints" / "step_000003").mkdir(parents=True)
    (work / "sft").mkdir()
    import torch

    checkpoint = work / "rl" / "checkpoints" / "step_000003"
    weights = {"w": torch.randn(300, 300), "steps": torch.tensor(3)}
    torch.save(weights, checkpoint / "model.pt")
    torch.save({"m": torch.zeros(300, 300)}, checkpoint / "optimizer.pt")
    torch.save({"step": 3}, checkpoint / "state.pt")
    (work / "rl" / "checkpoints" / "latest").write_text("step_000003\n")
    (work / "rl" / "metrics.jsonl").write_text('{"step": 3}\n')
    config = {"model": {"name_or_path": f"{work}/sft"}, "loop": {"tasks": f"{work}/family", "seed": 0}}
    (work / "rl" / "config.json").write_text(json.dumps(config))
    (work / "sft" / "model.safetensors").write_bytes(b"fp32 start weights: not carried")
    (work / "sft" / "tokenizer.json").write_text("{}")
    parts = learning_carry.pack(work, tmp_path / "parts", part_bytes=40_000)
    assert len(parts) >= 3 and all(p.stat().st_size <= 40_000 for p in parts)
    carried = learning_carry.unpack(tmp_path / "parts", tmp_path / "new")
    assert carried["checkpoint"] == "step_000003" and carried["parts"] == len(parts)
    new = tmp_path / "new"
    assert (new / "rl" / "metrics.jsonl").read_text() == '{"step": 3}\n'
    assert (new / "sft" / "tokenizer.json").exists()
    moved = json.loads((new / "rl" / "config.json").read_text())
    assert moved == {"model": {"name_or_path": f"{new}/sft"}, "loop": {"tasks": f"{new}/family", "seed": 0}}
    assert not (new / "rl" / "checkpoints" / "step_000003" / "optimizer.pt").exists()
    restored = torch.load(new / "rl" / "checkpoints" / "step_000003" / "model.pt", weights_only=True)
    assert restored["w"].dtype == torch.bfloat16 and torch.equal(restored["steps"], weights["steps"])
    with pytest.raises(UsageError, match="not empty"):
        learning_carry.unpack(tmp_path / "parts", new)
    with pytest.raises(UsageError, match="no carry.tgz.partNN"):
        learning_carry.unpack(tmp_path / "nothing", tmp_path / "other")
    parts[-1].unlink()  # an incomplete set
    with pytest.raises(UsageError, match="do not make a whole archive"):
        learning_carry.unpack(tmp_path / "parts", tmp_path / "third")
    with pytest.raises(UsageError, match="no checkpoint to carry"):
        learning_carry.pack(tmp_path / "nothing", tmp_path / "p2")


def test_a_live_carry_takes_whole_lines_and_the_newest_checkpoint_of_a_running_run(tmp_path, monkeypatch):
    """Packed while the run goes on (learning_launch.sh's live carry): a log caught half-way through
    a line keeps its whole lines; a checkpoint the run deletes mid-pack (it saved the next) is
    retried from the newest."""
    import learning_carry
    import torch

    work = tmp_path / "work"
    root = work / "rl" / "checkpoints"
    for step in (2, 4):
        (root / f"step_{step:06d}").mkdir(parents=True)
        torch.save({"w": torch.full((4,), float(step))}, root / f"step_{step:06d}" / "model.pt")
        torch.save({"step": step}, root / f"step_{step:06d}" / "state.pt")
    (root / "latest").write_text("step_000002\n")
    (work / "sft").mkdir()
    (work / "rl" / "config.json").write_text(json.dumps({"model": {"name_or_path": f"{work}/sft"}}))
    (work / "rl" / "episodes.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "comp')
    real = learning_carry._pack
    calls = []

    def racing(work_, dest, checkpoint, part_bytes):
        calls.append(checkpoint.name)
        if len(calls) == 1:  # the run saves step 4 and deletes step 2 while this reads it
            (root / "latest").write_text("step_000004\n")
            shutil.rmtree(checkpoint)
        return real(work_, dest, checkpoint, part_bytes)

    monkeypatch.setattr(learning_carry, "_pack", racing)
    learning_carry.pack(work, tmp_path / "parts")
    assert calls == ["step_000002", "step_000004"]
    carried = learning_carry.unpack(tmp_path / "parts", tmp_path / "new")
    assert carried["checkpoint"] == "step_000004"
    assert (tmp_path / "new" / "rl" / "episodes.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'
    assert (work / "rl" / "episodes.jsonl").read_text().endswith('"comp'), "the run's own file is untouched"


def test_resume_without_a_first_launch_is_a_usage_error(tmp_path, capsys):
    argv = ["--out", str(tmp_path / "out"), "--work", str(tmp_path / "empty"), "--scale", "toy", "--resume"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 2
    assert "start without --resume" in capsys.readouterr().err


def test_rl_only_tasks_stay_out_of_the_corpus_and_are_the_rl_phases_split(tmp_path, capsys):
    from kevin.train.family import is_combination, read_family

    work = tmp_path / "work"
    common = ["--work", str(work), "--scale", "toy", "--backend", "cpp", "--budget-s", "300"]
    common += ["--baseline-per-task", "1", "--set", "loop.stop_after_steps=1"]
    argv = ["--out", str(tmp_path / "l1"), *common, "--rl-tasks", "2"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    record = json.loads((tmp_path / "l1" / "metrics.json").read_text())
    assert record["family"] == {"train": 10, "heldout": 2, "rl_only": 2, "size": "small"}
    assert record["corpus"]["tasks"] == 10
    assert "10 training (SFT) + 2 RL-only / 2 held-out tasks" in (tmp_path / "l1" / "table.txt").read_text()
    rl_split = json.loads((tmp_path / "l1" / "split_rl.json").read_text())
    specs = {spec.task_id: spec for spec in read_family(work / "family")}
    assert len(rl_split["train"]) == 2 and all(is_combination(specs[i]) for i in rl_split["train"])
    assert rl_split["holdout"] == json.loads((tmp_path / "l1" / "split.json").read_text())["holdout"]
    config = json.loads((tmp_path / "l1" / "rl" / "config.json").read_text())
    assert config["loop"]["split"] == str(work / "family" / "split_rl.json")
    trained = {json.loads(line)["task"] for line in (work / "rl" / "episodes.jsonl").read_text().splitlines()}
    assert trained and trained <= set(rl_split["train"]), "the RL phase trains on the RL-only tasks alone"
    # a later launch keeps the run's own --rl-tasks; another count is a usage error
    capsys.readouterr()
    argv = ["--out", str(tmp_path / "l2"), *common, "--resume", "--rl-tasks", "1"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 2
    assert "--rl-tasks 1: the run in" in capsys.readouterr().err
    argv = ["--out", str(tmp_path / "l2"), *common, "--resume"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    assert json.loads((tmp_path / "l2" / "metrics.json").read_text())["family"]["rl_only"] == 2


def test_a_fresh_run_reuses_an_earlier_baseline_of_the_same_kernels_and_refuses_others(tmp_path, capsys):
    common = ["--scale", "toy", "--backend", "cpp", "--budget-s", "300", "--baseline-per-task", "1"]
    common += ["--set", "loop.stop_after_steps=1"]
    first = tmp_path / "l1"
    argv = ["--out", str(first), "--work", str(tmp_path / "w1"), *common]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    rows = [json.loads(line) for line in (first / "corpus_baseline.jsonl").read_text().splitlines()]
    assert rows and all(len(row["source_sha"]) == 16 for row in rows)

    def faster():  # any verdict it gave the baseline would show as speedup 3
        return FakeEvaluator(
            lambda task, source: EvalResult(stage="ok", compiled=True, correct=True, speedup=3.0, task_id=task.id)
        )

    second = tmp_path / "l2"
    argv = ["--out", str(second), "--work", str(tmp_path / "w2"), *common, "--baseline-from", str(first)]
    assert learning_run.main(argv, evaluator_factory=faster) == 0
    record = json.loads((second / "metrics.json").read_text())
    assert record["corpus_average"]["speedup"] == pytest.approx(1.25)
    assert record["corpus_average"]["reused_from"] == str(first)
    assert (second / "corpus_baseline.jsonl").read_text() == (first / "corpus_baseline.jsonl").read_text()
    capsys.readouterr()
    refusals = [
        (["--seed", "1"], "evaluated other kernels"),
        (["--baseline-per-task", "2"], "holds 2 verdicts and this run picks 4"),
    ]
    for extra, message in refusals:
        argv = ["--out", str(tmp_path / "l3"), "--work", str(tmp_path / "w3"), *common, *extra]
        assert learning_run.main(argv + ["--baseline-from", str(first)], evaluator_factory=faster) == 2
        assert message in capsys.readouterr().err, extra
        shutil.rmtree(tmp_path / "w3", ignore_errors=True)
    rows[0]["source_sha"] = "0" * 16
    (first / "corpus_baseline.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    argv = ["--out", str(tmp_path / "l4"), "--work", str(tmp_path / "w4"), *common, "--baseline-from", str(first)]
    assert learning_run.main(argv, evaluator_factory=faster) == 2
    assert "was another kernel there" in capsys.readouterr().err
    assert learning_run.main(argv[:-1] + [str(tmp_path)], evaluator_factory=faster) == 2
    assert "no corpus_baseline.jsonl" in capsys.readouterr().err
    rows[0]["source_sha"] = json.loads((second / "corpus_baseline.jsonl").read_text().splitlines()[0])["source_sha"]
    (first / "corpus_baseline.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    family = json.loads((first / "family.json").read_text())
    held = next(task for task in family["tasks"] if task["number"] == int(rows[0]["task"].split("_")[1]))
    held["shape"] = [held["shape"][0] * 2, held["shape"][1]]
    (first / "family.json").write_text(json.dumps(family))
    assert learning_run.main(argv, evaluator_factory=faster) == 2
    assert f"held-out task {rows[0]['task']} differs there" in capsys.readouterr().err


def test_a_baseline_timed_on_another_device_is_refused(tmp_path, capsys):
    """The corpus average is a speedup on this machine: an H100's baseline under an H200's run (or
    the GPU's under a CPU run) would compare the policy with another machine's numbers."""
    common = ["--scale", "toy", "--backend", "cpp", "--budget-s", "300", "--baseline-per-task", "1"]
    common += ["--set", "loop.stop_after_steps=1"]
    first = tmp_path / "l1"
    assert learning_run.main(["--out", str(first), "--work", str(tmp_path / "w1"), *common]) == 0
    rows = [json.loads(line) for line in (first / "corpus_baseline.jsonl").read_text().splitlines()]
    assert {row["verdict"]["device"] for row in rows} == {"cpu"}  # the real cpp evaluator's
    argv = ["--out", str(tmp_path / "l2"), "--work", str(tmp_path / "w2"), *common, "--baseline-from", str(first)]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    rows[1]["verdict"]["device"] = "NVIDIA H100 80GB HBM3"
    (first / "corpus_baseline.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    capsys.readouterr()
    argv = ["--out", str(tmp_path / "l3"), "--work", str(tmp_path / "w3"), *common, "--baseline-from", str(first)]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 2
    assert "timed on NVIDIA H100 80GB HBM3, cpu and this machine is cpu" in capsys.readouterr().err


def test_too_few_heldout_tasks_is_a_usage_error(tmp_path, capsys):
    argv = ["--out", str(tmp_path / "out"), "--work", str(tmp_path / "w"), "--heldout-tasks", "3"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 2
    assert "--heldout-tasks 3: use 4 or more" in capsys.readouterr().err


def test_sft_steps_sets_the_warm_starts_length(tmp_path, capsys):
    out = tmp_path / "learn"
    argv = ["--out", str(out), "--work", str(tmp_path / "work"), "--scale", "toy", "--backend", "cpp"]
    argv += ["--budget-s", "300", "--baseline-per-task", "1", "--sft-steps", "6", "--constant-weight", "4"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 0
    assert json.loads((out / "sft.json").read_text())["config"]["constant_weight"] == 4.0
    assert json.loads((out / "metrics.json").read_text())["sft"]["steps"] == 6  # the toy preset's: 4
    argv = ["--out", str(tmp_path / "o2"), "--scale", "toy", "--sft-steps", "0"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 2
    assert "--sft-steps 0: use 1 or more" in capsys.readouterr().err


def test_no_constant_draws_is_a_usage_error(tmp_path, capsys):
    argv = ["--out", str(tmp_path / "out"), "--scale", "toy", "--constant-draws", "0"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 2
    assert "--constant-draws 0: use 1 or more" in capsys.readouterr().err
    argv = ["--out", str(tmp_path / "out"), "--scale", "toy", "--length-cap", "0"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 2
    assert "--length-cap 0: use 1 or more" in capsys.readouterr().err
    argv = ["--out", str(tmp_path / "out"), "--scale", "toy", "--constant-weight", "-1"]
    assert learning_run.main(argv, evaluator_factory=PassingEvaluator) == 2
    assert "--constant-weight -1.0: use a positive weight" in capsys.readouterr().err


class SlowPolicy(CyclingPolicy):
    def generate(self, prompts, sampling):
        time.sleep(0.4)
        return super().generate(prompts, sampling)


def test_loop_time_limit_ends_the_launch_with_a_final_evaluation(tmp_path):
    config = tiny_config(
        rollout={"tasks_per_step": 1, "trajectories": 2, "turns": 1},
        loop={"steps": 50, "split": "seeded", "eval_every": 100, "time_limit_s": 2.5},
    )
    result = train(
        config,
        tmp_path / "run",
        tasks=tasks(10, levels=(1,)),
        policy_factory=lambda run: SlowPolicy(),
        evaluator_factory=lambda run: FakeEvaluator(),
        out=lambda line: None,
    )
    assert 1 <= result.last_step < 50
    assert "loop.time_limit_s=2.5" in result.stopped_by
    last = result.history[-1]
    assert last["step"] == result.last_step and "heldout/correct" in last  # evaluated at the end
    assert (tmp_path / "run" / "checkpoints" / f"step_{result.last_step:06d}").exists()


def _limited(time_limit_s: float, **loop):
    return tiny_config(
        rollout={"tasks_per_step": 1, "trajectories": 2, "turns": 1},
        loop={"steps": 50, "split": "seeded", "eval_every": 100, "eval_at_start": True, "eval_trajectories": 2,
              "eval_turns": 1, "time_limit_s": time_limit_s, **loop},
    )  # fmt: skip


def _train(config, run_dir, resume=False):
    return train(
        config,
        run_dir,
        resume=resume,
        tasks=tasks(10, levels=(1,)),
        policy_factory=lambda run: SlowPolicy(),
        evaluator_factory=lambda run: FakeEvaluator(),
        out=lambda line: None,
    )


def test_a_launch_whose_start_evaluation_leaves_no_room_takes_no_step(tmp_path):
    # The held-out evaluation at the start takes >= 0.4 s; a step and a final evaluation would not
    # fit the 0.6 s left, so the launch stops at step 0 instead of overrunning (H200, session 9).
    result = _train(_limited(1.0), tmp_path / "run")
    assert result.last_step == 0
    assert "no step and evaluation fit" in result.stopped_by
    assert [row["step"] for row in result.history] == [0]


def test_a_launch_stopped_at_step_0_resumes_without_evaluating_step_0_again(tmp_path):
    # The H200 learning run of session 10: launch 1 evaluated step 0 and had no room for a step, so
    # it left a config and no checkpoint; launch 2 could neither resume (no checkpoint) nor start
    # afresh (the directory held a run) and the call was lost.
    first = _train(_limited(1.0), tmp_path / "run")
    assert first.last_step == 0 and "no step and evaluation fit" in first.stopped_by
    assert (tmp_path / "run" / "checkpoints" / "step_000000").exists()
    heldout_file = tmp_path / "run" / "heldout.jsonl"
    step_0_rows = heldout_file.read_text().splitlines()
    assert step_0_rows
    resumed = _train(_limited(None, stop_after_steps=1), tmp_path / "run", resume=True)
    assert resumed.last_step == 1
    assert [row["step"] for row in resumed.history] == [1]  # step 0 was evaluated by launch 1 only
    assert heldout_file.read_text().splitlines() == step_0_rows


def test_a_resumed_launch_guards_its_first_step_with_the_earlier_launches_timing(tmp_path):
    first = _train(_limited(None, stop_after_steps=2), tmp_path / "run")
    assert first.last_step == 2
    # A step and an evaluation each took >= 0.4 s before: a 0.5 s launch has no room for them.
    resumed = _train(_limited(0.5), tmp_path / "run", resume=True)
    assert resumed.last_step == 2
    assert "no step and evaluation fit" in resumed.stopped_by


def test_watchdog_writes_a_partial_report_and_ends_the_process(tmp_path):
    out = tmp_path / "learn"
    command = [sys.executable, str(SCRIPT), "--out", str(out), "--work", str(tmp_path / "work")]
    command += ["--scale", "toy", "--backend", "cpp"]
    command += ["--budget-s", "0.1", "--grace-s", "0.1", "--cache-dir", str(tmp_path / "cache")]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert finished.returncode == 3, finished.stdout[-2000:] + finished.stderr[-2000:]
    record = json.loads((out / "metrics.json").read_text())
    assert record["partial"] == "watchdog"
    assert "PARTIAL: watchdog" in (out / "table.txt").read_text()


@pytest.mark.slow
def test_toy_dry_run_with_the_real_cpp_back_end(tmp_path):
    out = tmp_path / "learn"
    argv = ["--out", str(out), "--work", str(tmp_path / "work"), "--scale", "toy", "--backend", "cpp"]
    argv += ["--budget-s", "800"]
    argv += ["--baseline-per-task", "2", "--baseline-s", "400", "--cache-dir", str(tmp_path / "cache")]
    assert learning_run.main(argv) == 0
    rows = [json.loads(line) for line in (out / "corpus_baseline.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    for row in rows:  # real verdicts: honest and slow variants pass (a wrong one may slip through)
        assert row["verdict"]["blame"] != "infrastructure", row["verdict"]["error"]
        if row["label"] != "wrong":
            verdict = EvalResult.from_dict(row["verdict"])
            assert verdict.passed, verdict.explain()  # the blocking flag and its numbers, if any
    record = json.loads((out / "metrics.json").read_text())
    assert record["corpus_average"]["variants"] == 4 and record["after"] is not None


class VirtualClock:
    """The loop's clock in a test: it moves only when the policy says time passed, so a step's
    seconds are what the test sets, whatever the machine's load (real sleeps made this flaky)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class ColdStartPolicy(CyclingPolicy):
    """The first sampling is slow (a cold start: `first_s`), every later one quick (`then_s`)."""

    def __init__(self, clock: VirtualClock, first_s: float = 6.0, then_s: float = 0.5) -> None:
        super().__init__()
        self.clock, self.first_s, self.then_s = clock, first_s, then_s
        self.calls = 0

    def generate(self, prompts, sampling):
        self.calls += 1
        self.clock.now += self.first_s if self.calls == 1 else self.then_s
        return super().generate(prompts, sampling)


def test_a_cold_first_step_does_not_end_a_long_launch_early(tmp_path, monkeypatch):
    """The H200 (s11): a launch's first step took 2x a warm one, and guarding every later step with
    it stopped launches 100-170 s early. The guard takes the longest of the last RECENT_STEPS: once
    the cold step is out of that window, steps go on until a warm step and the final evaluation fit."""
    from kevin.train import loop

    clock = VirtualClock()
    monkeypatch.setattr(loop, "time", clock)
    config = tiny_config(
        rollout={"tasks_per_step": 1, "trajectories": 2, "turns": 1},
        loop={"steps": 200, "split": "seeded", "eval_every": 1000, "time_limit_s": 20.0},
    )
    result = train(
        config,
        tmp_path / "run",
        tasks=tasks(10, levels=(1,)),
        policy_factory=lambda run: ColdStartPolicy(clock),
        evaluator_factory=lambda run: FakeEvaluator(),
        out=lambda line: None,
    )
    assert "loop.time_limit_s=20" in result.stopped_by
    steps = [row.get("time/step_s", 0.0) for row in result.history]
    assert steps[:2] == [6.0, 0.5], steps
    # Guarded by the cold step for ever, the run would stop once another 6 s no longer fit (after
    # 14.5 s); guarded by the last RECENT_STEPS, it stops when a warm step no longer fits: at 20 s.
    assert sum(steps) == pytest.approx(20.0), steps


def test_an_evaluation_forced_by_the_time_guard_times_the_next_guard(tmp_path, monkeypatch):
    """The H200 (s28): the start's held-out evaluation took 248 s and a later one 55 s (identical
    kernels reused). Guarded by the start's, the run evaluated at step 5 because another step and
    evaluation would not fit, then stopped although, timed by that very evaluation, more steps did:
    264 s of its budget went unused. The guard after an evaluation uses that evaluation's time."""
    from kevin.train import loop

    clock = VirtualClock()
    monkeypatch.setattr(loop, "time", clock)
    config = _limited(30.0, eval_max_tasks=1, steps=200)
    result = train(
        config,
        tmp_path / "run",
        tasks=tasks(10, levels=(1,)),
        # The start's held-out sampling takes 8 s (every reference timed, no verdict reused), every
        # later sampling, a step's or a held-out evaluation's, 1 s.
        policy_factory=lambda run: ColdStartPolicy(clock, first_s=8.0, then_s=1.0),
        evaluator_factory=lambda run: FakeEvaluator(),
        out=lambda line: None,
    )
    assert "loop.time_limit_s=30" in result.stopped_by
    evaluated = [row["step"] for row in result.history if "heldout/correct" in row]
    # Guarded by the start's 8 s for ever, the first forced evaluation (after step 14, at 23 s) ended
    # the launch. Timed by its own 1 s, steps go on until a step and an evaluation no longer fit.
    assert evaluated == [0, 14, 20], evaluated
    assert result.last_step == 20 and clock.now == pytest.approx(30.0), (result.last_step, clock.now)


def test_the_report_says_how_well_the_warm_start_copies_constants():
    report = load_bench("learning_report_bench", "learning_report.py")
    record = {"steps": 1600, "first_loss": 8.1, "last_loss": 0.02, "val_losses": [[1, 8.0], [1600, 0.016]]}
    assert "constants" not in report._sft_line(record)
    line = report._sft_line({**record, "val_constants": [[1, 0.0, 0.01], [1600, 0.8125, 0.734]]})
    assert line.endswith("; its constants copied 0.81 (mean p 0.73) at step 1600"), line


def test_the_report_pairs_the_steps_after_a_resume_with_the_restored_step_judged_again():
    """Step 5 judged on the first machine (1.0, a fail), again on this one (1.2, 1.2); step 8 on this
    one (1.2 and 1.8). Against the start's machine's rows step 8 gains a kernel; against its own
    machine's step 5 it gains none and is +0.3 faster on the second sample only."""
    report = load_bench("learning_report_bench", "learning_report.py")

    def row(step, trajectory, speedup):
        verdict = {"stage": "ok", "correct": speedup is not None, "speedup": speedup, "blame": "none"}
        return {"step": step, "task": "t", "trajectory": trajectory, "turn": 1, "verdict": verdict,
                "candidate": f"k{step}{trajectory}{speedup}"}  # fmt: skip

    heldout = [row(5, 0, 1.0), row(5, 1, None), row(8, 0, 1.2), row(8, 1, 1.8)]
    resumed = [row(5, 0, 1.2), row(5, 1, 1.5)]
    assert report.paired_since_resume(heldout, []) == []
    assert report.paired_since_resume([r for r in heldout if r["step"] == 5], resumed) == []
    (paired,) = report.paired_since_resume(heldout, resumed)
    assert (paired["base"], paired["step"], paired["gained"], paired["lost"]) == (5, 8, 0, 0)
    assert paired["speedup_diff"] == pytest.approx(0.15)
    (first_machine,) = load_bench("heldout_paired_bench", "heldout_paired.py").compare(heldout)
    assert first_machine["gained"] == 1


def test_the_report_warns_when_the_start_and_the_last_step_were_judged_on_different_gpus():
    report = load_bench("learning_report_bench", "learning_report.py")
    record = {"after": {"step": 27}, "machines": {"0": "NVIDIA H200", "5": "NVIDIA H200"}}
    assert report._machines_line(record) == []  # step 27's machine unknown: nothing to say
    record["machines"]["27"] = "NVIDIA H200"
    assert report._machines_line(record) == []
    record["machines"]["27"] = "NVIDIA H100 80GB HBM3"
    (line,) = report._machines_line(record)
    assert line == (
        "(step 0 judged on NVIDIA H200, step 27 on NVIDIA H100 80GB HBM3: each speedup is its machine's own)"
    )
