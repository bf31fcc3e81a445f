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
