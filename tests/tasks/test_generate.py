"""`kevin tasks generate`: determinism, KernelBench dedupe, validation of every file, planted
degenerate tasks, the reference-time scale-up and the generated split.

One validated CLI run (module fixture, 4 small tasks) keeps the suite fast; everything else draws
text only or runs a fake clock.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kevin.cli import main
from kevin.errors import UsageError
from kevin.tasks import load_tasks, operators
from kevin.tasks.dedupe import load_kernelbench
from kevin.tasks.generate import (
    MANIFEST_FILE,
    SPLIT_FILE,
    GenerateOptions,
    draw_task,
    generate_set,
    kernelbench_sequences,
    measure_reference_ms,
    read_sequences,
    scale_to_min_ms,
    validate_candidates,
    write_set,
)
from kevin.tasks.loaders import kernelbench_dir
from kevin.tasks.operators import Step
from kevin.tasks.splits import read_excluded, split_by_name

NO_KERNELBENCH = "/nonexistent-kernelbench"


def _text_only(tmp_path: Path, name: str, n: int = 12, seed: int = 3, **extra) -> Path:
    options = GenerateOptions(
        n=n, seed=seed, validate=False, kernelbench=extra.pop("kernelbench", NO_KERNELBENCH)
    )
    return write_set(tmp_path / name, generate_set(options), options)


@pytest.fixture(scope="module")
def validated_set(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("generated") / "set"
    assert main(["tasks", "generate", "--n", "4", "--seed", "7", "--out", str(out)]) == 0
    return out


# --- drawing ---------------------------------------------------------------------------------------


def test_same_seed_gives_byte_identical_files(tmp_path: Path):
    first, second = _text_only(tmp_path, "a"), _text_only(tmp_path, "b")
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert {MANIFEST_FILE, SPLIT_FILE} <= set(names) and len(names) == 12 + 2
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    other = _text_only(tmp_path, "c", seed=4)
    assert sorted(p.name for p in other.glob("*.py")) != sorted(p.name for p in first.glob("*.py"))


def test_chains_compose_and_follow_the_recipe():
    for attempt in range(200):
        task = draw_task(0, attempt)
        ops = [operators.CATALOGUE[name] for name in task.ops]
        assert ops[0].group == "expensive"
        assert all(op.group != "expensive" for op in ops[1:]) and 1 <= len(ops) - 1 <= 5
        assert len(set(task.ops)) == len(task.ops)
        assert all(d >= 1 for d in task.output_shape())
    # the same seed draws the same operator sequence at both sizes
    assert draw_task(5, 9, "small").ops == draw_task(5, 9, "large").ops


def test_files_load_as_level_zero_tasks(tmp_path: Path):
    folder = _text_only(tmp_path, "set", n=5)
    tasks = load_tasks(str(folder))
    entries = json.loads((folder / MANIFEST_FILE).read_text())["tasks"]
    assert [t.id for t in tasks] == [e["id"] for e in entries] == [f"L0_{i}" for i in range(1, 6)]
    assert all(t.level == 0 and "class Model" in t.source for t in tasks)
    assert all(
        e["reference_ms"] is None and e["sequence"] == operators.sequence_key(e["ops"]) for e in entries
    )


# --- KernelBench dedupe ------------------------------------------------------------------------------


def _fake_kernelbench(root: Path, names: list[str]) -> Path:
    for level, name in names:
        folder = root / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.py").write_text("# data only\n")
    return root


def test_dedupe_rejects_kernelbench_sequences_with_synonyms(tmp_path: Path):
    # the first few draws of seed 3, renamed the way KernelBench would name them
    draws = [draw_task(3, a) for a in range(6)]
    kb_names = {
        "Gemm": "Matmul",
        "Multiply": "Scaling",
        "BiasAdd": "BiasAdd",
        "Swish": "Swish",
        "MaxPool": "MaxPool",
    }
    names = [
        (2, f"{i + 1}_" + "_".join(kb_names.get(op, op) for op in t.ops)) for i, t in enumerate(draws[:3])
    ]
    names.append((1, "19_ReLU"))
    root = _fake_kernelbench(tmp_path / "kb", names)
    keys = kernelbench_sequences(root)
    assert {t.key for t in draws[:3]} <= keys and "relu" in keys
    assert kernelbench_sequences(tmp_path / "absent") == set()
    result = generate_set(GenerateOptions(n=6, seed=3, validate=False, kernelbench=str(root)))
    assert result["dedupe"] == len(keys)
    assert not {t.key for t in result["tasks"]} & keys
    assert len({t.key for t in result["tasks"]}) == 6  # no sequence twice in a set either
    assert operators.sequence_key(["Conv2D", "Scaling", "Linear"]) == operators.sequence_key(
        ["Conv2d", "Multiply", "Gemm"]
    )


def test_no_generated_sequence_occurs_in_kernelbench(tmp_path: Path):
    if not (kernelbench_dir() / "level2").is_dir():
        pytest.skip(f"KernelBench data not found at {kernelbench_dir()}")
    sequences = load_kernelbench()
    assert len(sequences.file_name) > 150 and len(sequences.forward_code) > 150
    result = generate_set(GenerateOptions(n=60, seed=0, validate=False))
    assert result["dedupe"] == len(sequences.keys)
    assert not {t.key for t in result["tasks"]} & sequences.keys


def test_missing_kernelbench_is_said_and_recorded(tmp_path: Path, capsys):
    out = tmp_path / "set"
    argv = ["tasks", "generate", "--n", "2", "--seed", "1", "--no-validate", "--out", str(out)]
    assert main([*argv, "--kernelbench", str(_fake_kernelbench(tmp_path / "kb", [(2, "1_Gemm_ReLU")]))]) == 0
    assert "checked against 1 KernelBench" in capsys.readouterr().out
    empty = tmp_path / "empty_kb"
    empty.mkdir()
    assert main([*argv[:-1], str(tmp_path / "set2"), "--kernelbench", str(empty)]) == 0
    assert "no KernelBench files found" in capsys.readouterr().out
    assert json.loads((tmp_path / "set2" / MANIFEST_FILE).read_text())["kernelbench_dedupe_sequences"] == 0


# --- validation ----------------------------------------------------------------------------------------


def test_every_emitted_file_validates(validated_set: Path):
    data = json.loads((validated_set / MANIFEST_FILE).read_text())
    assert data["validated"] and len(data["tasks"]) == 4
    assert all(entry["validation"] == "ok" for entry in data["tasks"])
    assert sorted(p.name for p in validated_set.glob("*.py")) == sorted(e["file"] for e in data["tasks"])
    assert not (validated_set / ".generate_journal.jsonl").exists(), "a whole set keeps no journal"
    split = json.loads((validated_set / SPLIT_FILE).read_text())
    assert sorted(split["train"] + split["holdout"], key=lambda i: int(i[3:])) == [
        e["id"] for e in data["tasks"]
    ]


def test_planted_degenerate_tasks_are_dropped():
    base = draw_task(0, 0)
    last = base.steps[-1]
    zero = replace(base, steps=(*base.steps, Step("Zero", (), "x = x * 0.0", last.features)))
    constant = replace(base, steps=(*base.steps, Step("Ones", (), "x = torch.ones_like(x)", last.features)))
    kept, dropped = validate_candidates([zero, constant], GenerateOptions(n=2, jobs=2))
    assert kept == []
    assert [task.status for task, _ in dropped] == ["degenerate", "degenerate"]
    assert "all-zero" in dropped[0][1] and "same output" in dropped[1][1]


# --- reference time ------------------------------------------------------------------------------------


def test_scale_up_doubles_the_batch_until_min_ms():
    task = draw_task(0, 0)

    def fake_ms(source, device):  # 0.01 ms per batch row, read back from the file
        rows = int(source.split("batch_size = ")[1].split("\n")[0])
        return 0.01 * rows

    scaled, why = scale_to_min_ms(task, min_ms=0.1, device="cpu", budget_bytes=1 << 30, measure=fake_ms)
    assert why == "" and scaled.batch_size == 16 and scaled.reference_ms == pytest.approx(0.16)
    assert "batch_size = 16" in scaled.source()
    stuck, why = scale_to_min_ms(task, min_ms=0.1, device="cpu", budget_bytes=1000, measure=fake_ms)
    assert "budget" in why and stuck.reference_ms is None


def test_real_cpu_measurement_reaches_a_small_threshold():
    task = draw_task(0, 1)
    ms = measure_reference_ms(task.source(), device="cpu", warmup=1, repeats=3)
    assert ms > 0
    scaled, why = scale_to_min_ms(task, min_ms=ms * 1.5, device="cpu", budget_bytes=1 << 30)
    assert why == "" or "doublings" not in why
    assert scaled.batch_size >= task.batch_size


# --- splits -------------------------------------------------------------------------------------------


def test_generated_split_holds_out_whole_sequences(tmp_path: Path):
    folder = _text_only(tmp_path, "set", n=20)
    tasks, sequences = load_tasks(str(folder)), read_sequences(folder)
    split = split_by_name(tasks, "generated", sequences=sequences, seed=1)
    assert len(split.holdout) == 2 and len(split.train) == 18
    assert not {sequences[t.id] for t in split.train} & {sequences[t.id] for t in split.holdout}
    assert split_by_name(tasks, "generated", sequences=sequences, seed=1) == split
    written = split_by_name(tasks, str(folder / SPLIT_FILE))
    assert len(written.train) + len(written.holdout) == 20
    with pytest.raises(UsageError, match="manifest"):
        split_by_name(tasks, "generated")


def test_flagged_tasks_are_left_out_of_every_split(tmp_path: Path):
    folder = _text_only(tmp_path, "set", n=6)
    tasks = load_tasks(str(folder))
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {"results": [{"task_id": "L0_2", "status": "degenerate"}, {"task_id": "L0_3", "status": "ok"}]}
        )
    )
    excluded = read_excluded(report)
    assert excluded == {"L0_2": "degenerate"}
    for name in ("none", "paper", "seeded", str(folder / SPLIT_FILE)):
        split = split_by_name(tasks, name, excluded=excluded)
        ids = {t.id for t in split.train + split.holdout}
        assert "L0_2" not in ids and "L0_3" in ids, name


# --- command line ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--n", "0"], "--n must be at least 1"),
        (["--n", "2", "--min-ms", "-1"], "--min-ms must be positive"),
        (["--n", "2", "--kernelbench", NO_KERNELBENCH], "is not a folder"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys, extra, message):
    assert main(["tasks", "generate", "--out", str(tmp_path / "x"), "--no-validate", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_refuses_a_folder_that_holds_problems(tmp_path: Path, capsys):
    (tmp_path / "1_Old.py").write_text("# old\n")
    assert main(["tasks", "generate", "--n", "1", "--no-validate", "--out", str(tmp_path)]) == 2
    assert "already holds problem files" in capsys.readouterr().err


# --- a cut run goes on -------------------------------------------------------------------------------


def test_a_cut_generation_goes_on_from_its_journal_and_writes_the_same_set(tmp_path: Path, monkeypatch):
    """Session 33: `--device cuda --min-ms 0.1` for 100 tasks was cut by the device call's limit at
    96 validations and kept nothing. Each outcome is now journaled as it is known: a rerun into the
    same folder repeats none of them and writes the set an uninterrupted run writes, byte for byte."""
    from kevin.tasks import generate
    from kevin.tasks.validate import ValidationResult

    done = {"validated": [], "measured": []}
    cut = {"validate_after": None, "measure_after": None}

    def fake_validate(records, settings, *, jobs, progress):  # the first batch's 3rd task is degenerate
        results = []
        for record in records:
            if cut["validate_after"] is not None and len(done["validated"]) == cut["validate_after"]:
                raise KeyboardInterrupt
            status = "degenerate" if record.id == "L0_3" else "ok"
            result = ValidationResult(record.id, 0, record.name, status, "planted" * (status != "ok"), 0.1, None)
            done["validated"].append(record.name)
            progress(len(results) + 1, len(records), result)
            results.append(result)
        return results

    def fake_ms(source, device):
        rows = int(source.split("batch_size = ")[1].split("\n")[0])
        return 0.001 * rows * (1 + len(source) % 7)

    real_scale = generate.scale_to_min_ms

    def fake_scale(task, **kwargs):
        if cut["measure_after"] is not None and len(done["measured"]) == cut["measure_after"]:
            raise KeyboardInterrupt
        done["measured"].append(task.attempt)
        return real_scale(task, **kwargs, measure=fake_ms)

    monkeypatch.setattr(generate.validate, "validate_tasks", fake_validate)
    monkeypatch.setattr(generate, "scale_to_min_ms", fake_scale)

    def options(out: Path, seed: int = 5) -> GenerateOptions:
        journal = str(out / generate.JOURNAL_FILE)
        return GenerateOptions(n=5, seed=seed, min_ms=0.05, kernelbench=NO_KERNELBENCH, journal=journal)

    whole = options(tmp_path / "whole")
    write_set(tmp_path / "whole", generate_set(whole), whole)
    first_validated, first_measured = len(done["validated"]), len(done["measured"])
    assert first_validated == 6 and first_measured == 5  # one drawn task was dropped, one more drawn

    done["validated"].clear(), done["measured"].clear()
    cut.update(validate_after=4)
    parts = options(tmp_path / "parts")
    with pytest.raises(KeyboardInterrupt):
        generate_set(parts)
    assert len(done["validated"]) == 4
    cut.update(validate_after=None, measure_after=2)  # the 5th validation, then 2 of 4 measurements
    with pytest.raises(KeyboardInterrupt):
        generate_set(parts)
    assert len(done["validated"]) == 5 and len(done["measured"]) == 2
    cut.update(measure_after=None)
    write_set(tmp_path / "parts", generate_set(parts), parts)
    assert len(done["validated"]) == first_validated and len(done["measured"]) == first_measured
    names = sorted(p.name for p in (tmp_path / "whole").iterdir() if p.name != generate.JOURNAL_FILE)
    assert names == sorted(p.name for p in (tmp_path / "parts").iterdir() if p.name != generate.JOURNAL_FILE)
    for name in names:
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "parts" / name).read_bytes(), name
    with pytest.raises(UsageError, match="seed 5 there, 6 now"):
        generate_set(options(tmp_path / "parts", seed=6))
