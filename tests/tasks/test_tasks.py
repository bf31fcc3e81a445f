"""Task loaders, selection, splits and the `kevin tasks list|show` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kevin import tasks as tasks_module
from kevin.cli import main
from kevin.errors import UsageError
from kevin.tasks import (
    Split,
    Task,
    content_hash,
    kernelbench_dir,
    load_bundled,
    load_directory,
    load_file,
    load_jsonl,
    load_parquet,
    load_tasks,
    parse_id_spec,
    save_split,
    select_tasks,
    split_from_file,
    split_paper,
    split_seeded,
    with_size,
)

RELU_SOURCE = "import torch\n\nclass Model:\n    pass\n\ndef get_inputs():\n    return []\n"


def problem_source(tag: str) -> str:
    """A distinct (never executed) problem text, so every file gets its own hash."""
    return (
        f"# problem {tag}\nclass Model: ...\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    """A small KernelBench-layout folder: level1 has 2, 10, 19; level2 has 1."""
    root = tmp_path / "kb"
    write(root / "level1" / "19_ReLU.py", RELU_SOURCE)
    write(root / "level1" / "2_Standard_matrix_multiplication_.py", problem_source("L1_2"))
    write(root / "level1" / "10_3D_tensor_matrix_multiplication.py", problem_source("L1_10"))
    write(root / "level2" / "1_Conv2D_ReLU_BiasAdd.py", problem_source("L2_1"))
    write(root / "level1" / "__init__.py", "")
    return root


def dataset_rows() -> list[dict]:
    return [
        {"code": RELU_SOURCE, "level": 1, "problem_id": 19, "name": "19_ReLU"},
        {"code": problem_source("L2_1"), "level": 2, "problem_id": 1, "name": "1_Conv2D_ReLU_BiasAdd"},
    ]


def make_tasks(counts_per_level: dict[int, int]) -> list[Task]:
    return [
        Task.from_source(
            problem_source(f"{level}-{n}"), id=f"L{level}_{n}", name=f"p{n}", level=level, problem=n
        )
        for level, count in counts_per_level.items()
        for n in range(1, count + 1)
    ]


# --- loaders -------------------------------------------------------------------------------------


def test_directory_loader_reads_kernelbench_layout_in_natural_order(kb_dir: Path):
    tasks = load_directory(kb_dir)
    assert [t.id for t in tasks] == ["L1_2", "L1_10", "L1_19", "L2_1"]
    relu = tasks[2]
    assert (relu.level, relu.problem, relu.name) == (1, 19, "ReLU")
    assert relu.source == RELU_SOURCE
    assert relu.hash == content_hash(RELU_SOURCE)
    assert relu.origin == str((kb_dir / "level1" / "19_ReLU.py").resolve())
    assert tasks[0].name == "Standard_matrix_multiplication_"


def test_directory_loader_reads_one_level_folder_and_flat_folders(kb_dir: Path, tmp_path: Path):
    assert [t.id for t in load_directory(kb_dir / "level2")] == ["L2_1"]
    write(tmp_path / "flat" / "3_thing.py", problem_source("flat3"))
    write(tmp_path / "flat" / "free_name.py", problem_source("free"))
    flat = {t.id: t for t in load_directory(tmp_path / "flat")}
    assert set(flat) == {"L0_3", "free_name"}
    assert (flat["L0_3"].level, flat["L0_3"].problem, flat["L0_3"].name) == (0, 3, "thing")


def test_file_loader_takes_level_from_parent_folder(kb_dir: Path):
    task = load_file(kb_dir / "level1" / "19_ReLU.py")
    assert (task.id, task.level, task.name) == ("L1_19", 1, "ReLU")
    assert Task.from_dict(task.to_dict()) == task


def test_duplicate_problem_numbers_are_a_usage_error(tmp_path: Path):
    write(tmp_path / "dup" / "1_a.py", problem_source("a"))
    write(tmp_path / "dup" / "01_b.py", problem_source("b"))
    with pytest.raises(UsageError, match="duplicate task id L0_1"):
        load_directory(tmp_path / "dup")


def test_jsonl_rows_match_the_folder_loader(tmp_path: Path, kb_dir: Path):
    path = write(tmp_path / "kb.jsonl", "\n".join(json.dumps(r) for r in dataset_rows()) + "\n\n")
    tasks = load_jsonl(path)
    assert [(t.id, t.name, t.level, t.problem) for t in tasks] == [
        ("L1_19", "ReLU", 1, 19),
        ("L2_1", "Conv2D_ReLU_BiasAdd", 2, 1),
    ]
    assert tasks[0].origin == f"hf:{path.resolve()}"
    from_folder = {t.id: t.hash for t in load_directory(kb_dir)}
    assert all(from_folder[t.id] == t.hash for t in tasks)


def test_parquet_rows_load_like_jsonl(tmp_path: Path):
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "kb.parquet"
    pq.write_table(pyarrow.Table.from_pylist(dataset_rows()), path)
    jsonl = write(tmp_path / "kb.jsonl", "\n".join(json.dumps(r) for r in dataset_rows()))
    assert [(t.id, t.hash) for t in load_parquet(path)] == [(t.id, t.hash) for t in load_jsonl(jsonl)]


def test_bad_dataset_exports_are_usage_errors(tmp_path: Path):
    bad_json = write(
        tmp_path / "bad.jsonl", '{"code": "x", "level": 1, "problem_id": 1, "name": "a"}\n{oops\n'
    )
    with pytest.raises(UsageError, match=r"bad.jsonl:2: not valid JSON"):
        load_jsonl(bad_json)
    missing = write(tmp_path / "missing.jsonl", json.dumps({"code": "x", "level": 1}) + "\n")
    with pytest.raises(UsageError, match="lacks column.*problem_id, name"):
        load_jsonl(missing)


BUNDLED_TEMPLATE = '''"""A bundled task."""
import torch

SIZE = "small"
SIZES = {{"small": {{"n": 8}}, "large": {{"n": 4096}}}}
N = SIZES[SIZE]["n"]  # {tag}
'''


def test_bundled_tasks_follow_the_convention_and_rewrite_size(tmp_path: Path):
    folder = tmp_path / "bundled"
    write(folder / "01_gemm_relu.py", BUNDLED_TEMPLATE.format(tag="gemm"))
    write(folder / "02_softmax.py", BUNDLED_TEMPLATE.format(tag="softmax"))
    small = load_bundled(directory=folder)
    large = load_bundled("large", directory=folder)
    assert [(t.id, t.name, t.level, t.problem, t.origin) for t in small] == [
        ("B_01", "gemm_relu", 0, 1, "bundled"),
        ("B_02", "softmax", 0, 2, "bundled"),
    ]
    assert small[0].source == BUNDLED_TEMPLATE.format(tag="gemm")
    assert 'SIZE = "large"\n' in large[0].source and 'SIZE = "small"' not in large[0].source
    assert large[0].source.replace('SIZE = "large"', 'SIZE = "small"') == small[0].source
    assert small[0].hash != large[0].hash
    assert load_bundled(directory=tmp_path / "absent") == []


def test_bundled_size_rewrite_needs_exactly_one_size_line():
    with pytest.raises(ValueError, match="exactly one line"):
        with_size("SIZES = {}\n", "large")
    with pytest.raises(ValueError, match="found 2"):
        with_size('SIZE = "small"\nSIZE = "small"\n', "large")
    with pytest.raises(UsageError, match="unknown size 'huge'"):
        with_size('SIZE = "small"\n', "huge")


def test_load_tasks_dispatches_on_the_source(tmp_path: Path, kb_dir: Path, monkeypatch):
    bundled = tmp_path / "bundled"
    write(bundled / "07_norm.py", BUNDLED_TEMPLATE.format(tag="norm"))
    monkeypatch.setattr(tasks_module.loaders, "bundled_dir", lambda: bundled)
    monkeypatch.setenv("KEVIN_KERNELBENCH_DIR", str(kb_dir))
    jsonl = write(tmp_path / "kb.jsonl", "\n".join(json.dumps(r) for r in dataset_rows()))

    assert [t.id for t in load_tasks()] == ["B_07"]
    assert 'SIZE = "large"' in load_tasks("bundled", size="large")[0].source
    assert len(load_tasks("kernelbench")) == 4
    assert len(load_tasks(kb_dir)) == 4
    assert [t.id for t in load_tasks(str(kb_dir / "level1" / "19_ReLU.py"))] == ["L1_19"]
    assert [t.id for t in load_tasks(jsonl)] == ["L1_19", "L2_1"]


def test_load_tasks_explains_bad_sources(tmp_path: Path, monkeypatch):
    with pytest.raises(UsageError, match="task source not found: .*nowhere"):
        load_tasks(tmp_path / "nowhere")
    with pytest.raises(UsageError, match="use a folder, .py, .parquet or .jsonl"):
        load_tasks(write(tmp_path / "notes.txt", "hello"))
    monkeypatch.setenv("KEVIN_KERNELBENCH_DIR", str(tmp_path / "no_kb"))
    with pytest.raises(UsageError, match="KernelBench data not found.*KEVIN_KERNELBENCH_DIR"):
        load_tasks("kernelbench")
    monkeypatch.setattr(tasks_module.loaders, "bundled_dir", lambda: tmp_path / "empty")
    with pytest.raises(UsageError, match="no tasks found in bundled tasks"):
        load_tasks()


def test_kernelbench_dir_defaults_next_to_the_repo_and_obeys_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("KEVIN_KERNELBENCH_DIR", raising=False)
    repo_root = Path(tasks_module.__file__).resolve().parents[2]
    assert kernelbench_dir() == repo_root.parent / "shared" / "kernelbench_data"
    monkeypatch.setenv("KEVIN_KERNELBENCH_DIR", str(tmp_path))
    assert kernelbench_dir() == tmp_path


# --- selection -----------------------------------------------------------------------------------


def test_id_spec_parses_numbers_ranges_and_task_ids():
    spec = parse_id_spec("1-3, 15,L1_19,B_02")
    assert spec.problems == {1, 2, 3, 15}
    assert spec.task_ids == {"L1_19", "B_02"}


@pytest.mark.parametrize("bad", ["", "1,,2", "a", "1-", "-3", "3-1", "1-2-3", "L1"])
def test_bad_id_specs_are_usage_errors(bad: str):
    with pytest.raises(UsageError, match="--ids"):
        parse_id_spec(bad)


def test_selection_by_level_ids_and_name_glob(kb_dir: Path):
    tasks = load_directory(kb_dir)
    ids = lambda chosen: [t.id for t in chosen]  # noqa: E731
    assert ids(select_tasks(tasks, level=2)) == ["L2_1"]
    assert ids(select_tasks(tasks, level=[1, 2], ids="1-2")) == ["L1_2", "L2_1"]
    assert ids(select_tasks(tasks, ids="L1_19,10")) == ["L1_10", "L1_19"]
    assert ids(select_tasks(tasks, name="*MATRIX*")) == ["L1_2", "L1_10"]
    assert ids(select_tasks(tasks, level=1, name="relu")) == ["L1_19"]
    assert select_tasks(tasks, level=3) == []
    with pytest.raises(UsageError, match="no task in .* matches level=3"):
        load_tasks(kb_dir, level=3)


# --- splits --------------------------------------------------------------------------------------


def test_seeded_split_is_reproducible_order_free_and_a_partition():
    tasks = make_tasks({1: 40})
    split = split_seeded(tasks, holdout_fraction=0.25, seed=7)
    assert len(split.holdout) == 10 and len(split.train) == 30
    assert {t.id for t in split.train} | {t.id for t in split.holdout} == {t.id for t in tasks}
    assert not {t.id for t in split.train} & {t.id for t in split.holdout}
    assert split_seeded(list(reversed(tasks)), holdout_fraction=0.25, seed=7) == split
    assert split_seeded(tasks, holdout_fraction=0.25, seed=8).holdout != split.holdout


def test_paper_split_holds_out_ten_percent_of_each_level():
    split = split_paper(make_tasks({1: 100, 2: 100, 3: 50}), seed=0)
    per_level = lambda side, level: sum(t.level == level for t in side)  # noqa: E731
    assert [per_level(split.train, lv) for lv in (1, 2, 3)] == [90, 90, 45]
    assert [per_level(split.holdout, lv) for lv in (1, 2, 3)] == [10, 10, 5]
    assert split_paper(make_tasks({1: 100, 2: 100, 3: 50}), seed=0) == split


def test_split_never_holds_out_everything():
    assert len(split_seeded(make_tasks({1: 1}), holdout_fraction=0.9).train) == 1
    with pytest.raises(UsageError, match=r"must be in \[0, 1\)"):
        split_seeded(make_tasks({1: 3}), holdout_fraction=1.0)


def test_split_file_round_trips_and_rejects_bad_files(tmp_path: Path):
    tasks = make_tasks({1: 6})
    split = split_seeded(tasks, holdout_fraction=0.5, seed=3)
    save_split(split, tmp_path / "split.json")
    assert split_from_file(tasks, tmp_path / "split.json") == split
    assert split_from_file(
        tasks, write(tmp_path / "part.json", '{"train": ["L1_1"], "holdout": []}')
    ) == Split(train=(tasks[0],), holdout=())
    cases = {
        "unknown.json": ('{"train": ["L9_9"], "holdout": []}', "unknown task ids"),
        "both.json": ('{"train": ["L1_1"], "holdout": ["L1_1"]}', "in both train and holdout"),
        "shape.json": ('{"train": "L1_1"}', "must be"),
        "broken.json": ("{", "not valid JSON"),
    }
    for name, (text, message) in cases.items():
        with pytest.raises(UsageError, match=message):
            split_from_file(tasks, write(tmp_path / name, text))


# --- command line --------------------------------------------------------------------------------


def test_tasks_help_lists_the_subcommands(capsys):
    assert main(["tasks", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(word in out for word in ("list", "show", "validate"))
    assert main(["tasks", "list", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(option in out for option in ("--source", "--level", "--ids", "--name", "--size"))


def test_bare_tasks_command_prints_help_and_exits_2(capsys):
    assert main(["tasks"]) == 2
    assert "list" in capsys.readouterr().err


def test_list_prints_a_table(kb_dir: Path, capsys):
    assert main(["tasks", "list", "--source", str(kb_dir), "--level", "1", "--ids", "2-19"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "level", "name", "hash"]
    assert [line.split()[0] for line in lines[1:-1]] == ["L1_2", "L1_10", "L1_19"]
    assert lines[3].split() == ["L1_19", "1", "ReLU", content_hash(RELU_SOURCE)]
    assert lines[-1] == "3 task(s)"


def test_show_prints_metadata_and_source(kb_dir: Path, capsys):
    assert main(["tasks", "show", "l1_19", "--source", str(kb_dir)]) == 0
    out = capsys.readouterr().out
    assert "# id: L1_19\n" in out and "# name: ReLU\n" in out
    assert f"# hash: {content_hash(RELU_SOURCE)}\n" in out
    assert out.endswith(RELU_SOURCE)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tasks", "show", "L7_7"], "no task 'L7_7'"),
        (["tasks", "list", "--ids", "5-1"], "--ids range"),
        (["tasks", "list", "--level", "one"], "invalid int value"),
        (["tasks", "list", "--name", "nothing*"], "matches"),
    ],
)
def test_bad_input_exits_2_with_one_line(kb_dir: Path, capsys, argv, message):
    assert main(argv + ["--source", str(kb_dir)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("kevin: error: ") and captured.err.count("\n") == 1
    assert message in captured.err


def test_missing_source_exits_2(tmp_path: Path, capsys):
    assert main(["tasks", "list", "--source", str(tmp_path / "missing")]) == 2
    assert "task source not found" in capsys.readouterr().err


# --- the real KernelBench snapshot ---------------------------------------------------------------


def test_all_kernelbench_problems_load_and_list(kernelbench: Path, capsys):
    tasks = load_tasks(kernelbench)
    assert len(tasks) == 250
    assert len({t.id for t in tasks}) == 250
    assert [sum(t.level == lv for t in tasks) for lv in (1, 2, 3)] == [100, 100, 50]
    assert all("class Model" in t.source and "def get_inputs" in t.source for t in tasks)
    relu = next(t for t in tasks if t.id == "L1_19")
    assert relu.name == "ReLU" and relu.problem == 19
    split = split_paper(tasks)
    assert (len(split.train), len(split.holdout)) == (225, 25)

    assert main(["tasks", "list", "--source", str(kernelbench)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 252 and lines[-1] == "250 task(s)"
    assert lines[1].split()[0] == "L1_1"
