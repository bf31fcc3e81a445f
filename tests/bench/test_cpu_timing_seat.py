"""bench/cpu_timing_seat.py on the CPU: its statistics on numbers worked by hand, the rounds' order
(both modes in every round, their order flipped each round, the mode reaching the worker through the
environment), and the report's files, with the evaluation scripted."""

from __future__ import annotations

import json
import os

import pytest
from bench_scripts import load_script

from kevin.evaluator.cores import CPU_SEAT_VARIABLE

bench = load_script("cpu_timing_seat_bench", "cpu_timing_seat.py")


def _record(speedup, mode="one", passed=True, kernel="B_01"):
    return {
        "kernel": kernel,
        "mode": mode,
        "passed": passed,
        "stage": "timing" if passed else "correctness",
        "flags": [] if passed else ["mismatch"],
        "speedup": speedup if passed else None,
        "runtime_ms": 0.1 if passed else None,
        "baseline_ms": 0.1 * speedup if passed else None,
        "seat": [1, 1],
        "error": "" if passed else "output 0 differs",
    }


def test_stats_are_the_sample_cv_and_the_range_over_the_median_of_the_passed_evaluations():
    records = [_record(1.0), _record(1.2), _record(1.4), _record(9.0, passed=False)]
    s = bench.stats(records)
    assert (s["n"], s["evaluated"]) == (3, 4)
    assert s["speedup"] == {"median": 1.2, "min": 1.0, "max": 1.4}
    # mean 1.2, sample stdev 0.2; range 0.4 over median 1.2
    assert s["cv"] == pytest.approx(0.2 / 1.2)
    assert s["spread"] == pytest.approx(0.4 / 1.2)
    assert s["baseline_ms"]["max"] == pytest.approx(0.14)
    assert s["not_passed"] == ["correctness ['mismatch'] output 0 differs"]


def test_one_evaluation_has_no_spread():
    s = bench.stats([_record(1.5)])
    assert (s["cv"], s["spread"]) == (None, None)


def test_rounds_alternate_the_modes_and_the_report_has_both_per_kernel(tmp_path, monkeypatch):
    seen = []

    def scripted(row, mode, cache, budget_ms):
        os.environ[CPU_SEAT_VARIABLE] = mode  # as the real one does
        seen.append((row["problem_id"], mode))
        return _record(1.0 + len(seen) / 10, mode=mode, kernel=row["problem_id"])

    monkeypatch.setattr(bench, "evaluate_row", lambda row, mode, cache, budget: scripted(row, mode, cache, budget))
    monkeypatch.setattr(bench, "environment", lambda: {"cores": 2, "torch": "x"})
    monkeypatch.setenv(CPU_SEAT_VARIABLE, "caller's")
    assert bench.main(["--out", str(tmp_path), "--kernels", "01,02", "--rounds", "3"]) == 0
    assert seen == [
        ("B_01", "free"), ("B_01", "one"), ("B_02", "free"), ("B_02", "one"),
        ("B_01", "one"), ("B_01", "free"), ("B_02", "one"), ("B_02", "free"),
        ("B_01", "free"), ("B_01", "one"), ("B_02", "free"), ("B_02", "one"),
    ]
    assert os.environ[CPU_SEAT_VARIABLE] == "caller's"  # main gives the caller's value back
    report = json.loads((tmp_path / "cpu_timing_seat.json").read_text())
    assert set(report["kernels"]) == {"B_01", "B_02"}
    assert {mode: s["n"] for mode, s in report["kernels"]["B_02"].items()} == {"free": 3, "one": 3}
    table = (tmp_path / "cpu_timing_seat.md").read_text()
    assert sum(line.startswith("| B_0") for line in table.splitlines()) == 4


def test_the_mode_reaches_the_worker_through_the_environment(tmp_path, monkeypatch):
    captured = {}

    def fake_evaluate(task, source, config):
        captured["mode"] = os.environ.get(CPU_SEAT_VARIABLE)
        captured["baseline_cache"] = config.baseline_cache
        raise RuntimeError("stop here")

    monkeypatch.setattr("kevin.evaluator.evaluate.evaluate", fake_evaluate)
    # Set through monkeypatch, so that what evaluate_row writes over it is undone after the test (a
    # delenv of an absent variable records nothing, and the "free" written here then left every later
    # test's CPU timings unpinned: the first CI run of this file).
    monkeypatch.setenv(CPU_SEAT_VARIABLE, "one")
    row = bench.bundled_row(bench.task_files(["01"])[0], "cpp", "small", tmp_path)
    with pytest.raises(RuntimeError, match="stop here"):
        bench.evaluate_row(row, "free", tmp_path / "cache", None)
    assert captured == {"mode": "free", "baseline_cache": False}
