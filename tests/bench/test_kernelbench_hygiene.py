"""bench/kernelbench_hygiene.py keeps each result as it is known and goes on from them when run again."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from bench_scripts import load_script

from kevin.errors import UsageError
from kevin.tasks.validate import ValidationResult

hygiene = load_script("kernelbench_hygiene", "kernelbench_hygiene.py")

TASKS = [SimpleNamespace(id=f"L1_{n}", level=1, name=f"problem_{n}") for n in (1, 2, 3)]
STATUS = {"L1_1": "ok", "L1_2": "degenerate", "L1_3": "ok"}


def result(task) -> ValidationResult:
    return ValidationResult(task.id, task.level, task.name, STATUS[task.id], "", 1.0, None)


def test_a_run_cut_short_goes_on_from_its_journal_and_leaves_none_behind(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(hygiene, "load_tasks", lambda source, level: list(TASKS))
    given: list[list[str]] = []

    def cut_after_two(tasks, settings, jobs, progress):
        given.append([t.id for t in tasks])
        for done, task in enumerate(tasks[:2], start=1):
            progress(done, len(tasks), result(task))
        raise KeyboardInterrupt  # the device call's limit

    def whole(tasks, settings, jobs, progress):
        given.append([t.id for t in tasks])
        results = [result(t) for t in tasks]
        for done, r in enumerate(results, start=1):
            progress(done, len(tasks), r)
        return results

    out = tmp_path / "hygiene.json"
    argv = ["--levels", "1", "--device", "cpu", "--out", str(out)]
    monkeypatch.setattr(hygiene, "validate_tasks", cut_after_two)
    with pytest.raises(KeyboardInterrupt):
        hygiene.main(argv)
    assert not out.exists() and (tmp_path / "hygiene.journal.jsonl").exists()

    monkeypatch.setattr(hygiene, "validate_tasks", whole)
    assert hygiene.main(argv) == 0
    assert given == [["L1_1", "L1_2", "L1_3"], ["L1_3"]]
    report = json.loads(out.read_text())
    assert [r["task_id"] for r in report["results"]] == ["L1_1", "L1_2", "L1_3"]
    assert report["excluded"] == [{"id": "L1_2", "name": "problem_2", "status": "degenerate", "reason": ""}]
    assert report["results_from_journal"] == 2
    assert not (tmp_path / "hygiene.journal.jsonl").exists()


def test_a_journal_of_other_options_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(hygiene, "load_tasks", lambda source, level: list(TASKS))

    def cut(tasks, settings, jobs, progress):
        progress(1, len(tasks), result(tasks[0]))
        raise KeyboardInterrupt

    monkeypatch.setattr(hygiene, "validate_tasks", cut)
    out = str(tmp_path / "hygiene.json")
    with pytest.raises(KeyboardInterrupt):
        hygiene.main(["--levels", "1", "--device", "cpu", "--out", out])
    with pytest.raises(UsageError, match="timeout_s"):
        hygiene.main(["--levels", "1", "--device", "cpu", "--out", out, "--timeout-s", "30"])


def test_package_writes_the_shipped_list_from_a_whole_gpu_report_only(tmp_path, monkeypatch, capsys) -> None:
    """`--package REPORT`: the list `kernelbench` names (read_excluded) comes from a whole GPU report of
    levels 1-3; a CPU report, a report of fewer problems or one that skipped some is refused."""
    from kevin.tasks.splits import read_excluded

    monkeypatch.setattr(hygiene, "load_tasks", lambda source, level: list(TASKS))
    rows = [dict(task_id=t.id, level=1, name=t.name, status=STATUS[t.id]) for t in TASKS]
    report = {
        "commit": "abc",
        "machine": "m",
        "levels": [1, 2, 3],
        "settings": {"device": "cuda"},
        "excluded": [{"id": "L1_2", "name": "problem_2", "status": "degenerate", "reason": "r"}],
        "results": rows,
    }
    target = tmp_path / "shipped.json"
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert hygiene.package(path, target) == ["L1_2"]
    assert read_excluded(target) == {"L1_2": "degenerate"}
    for broken in (
        {**report, "settings": {"device": "cpu"}},
        {**report, "levels": [1]},
        {**report, "results": rows[:2]},
        {**report, "results": [*rows[:2], {**rows[2], "status": "skipped"}]},
    ):
        path.write_text(json.dumps(broken))
        with pytest.raises(UsageError):
            hygiene.package(path, tmp_path / "not_written.json")
    assert not (tmp_path / "not_written.json").exists()
    assert hygiene.main(["--package", str(tmp_path / "absent.json")]) == 2
    assert "not a readable report" in capsys.readouterr().err


def test_the_shipped_list_is_the_committed_gpu_reports_and_the_default_everywhere() -> None:
    """Issue #18: KernelBench's degenerate and nondeterministic problems are listed, shipped with kevin,
    and left out of the trainer's and `kevin bench`'s splits unless asked otherwise."""
    from pathlib import Path

    from kevin.cli import build_parser
    from kevin.tasks.splits import EXCLUDED_FILE, KERNELBENCH_EXCLUDED, read_excluded
    from kevin.train.config import TrainConfig

    shipped = json.loads(EXCLUDED_FILE.read_text())
    committed = json.loads((Path(__file__).resolve().parents[2] / shipped["report"]).read_text())
    assert read_excluded(KERNELBENCH_EXCLUDED) == {r["id"]: r["status"] for r in committed["excluded"]}
    assert read_excluded("kernelbench")["L2_66"] == "nondeterministic"
    assert read_excluded("kernelbench")["L1_23"] == "degenerate"
    assert len(committed["results"]) == 250 and committed["settings"]["device"] == "cuda"
    assert TrainConfig().loop.exclude == KERNELBENCH_EXCLUDED
    assert build_parser().parse_args(["bench", "--replay", "r.jsonl"]).exclude == KERNELBENCH_EXCLUDED
