"""bench/fetch_ab.py: the control runner's profiler warm-up off and on, side by side (issue #19)."""

from __future__ import annotations

import json
import os
import types

from bench_scripts import load_script

ab = load_script("fetch_ab", "fetch_ab.py")


def row(mode, fetch, bracket, copy, copy_bracket, flags=()):
    return {
        "mode": mode, "passed": True, "flags": list(flags), "control_warmed": mode == "on",
        "fetch_timed": fetch, "fetch_bracket": bracket, "copy_timed": copy, "copy_bracket": copy_bracket,
    }  # fmt: skip


def test_the_gaps_are_medians_per_mode_split_into_copy_and_signalling():
    rows = [
        row("off", 0.25, 0.13, 0.14, 0.06, ["deferred_work"]), row("off", 0.20, 0.15, 0.10, 0.09),
        row("off", 0.30, 0.20, 0.12, 0.10), row("on", 0.21, 0.20, 0.11, 0.10), row("on", None, 0.2, None, 0.1),
    ]  # fmt: skip
    table = ab.summary(rows)
    assert table["off"] == {
        "verdicts": 3, "passed": 3, "deferred_work": 1, "control_warmed": 0,
        "fetch_gap_ms": 0.1, "copy_gap_ms": 0.02, "signalling_gap_ms": 0.04,
    }  # fmt: skip
    assert table["on"]["verdicts"] == 2 and table["on"]["fetch_gap_ms"] == 0.01
    assert table["on"]["control_warmed"] == 2
    text = ab.render(table)
    assert text.splitlines()[1].split()[:4] == ["off", "3", "3", "1"]


def test_both_modes_evaluated_with_the_cpp_back_end(tmp_path, capsys):
    assert ab.main(["--out", str(tmp_path), "--backend", "cpp", "--tasks", "01_gelu_tanh", "--rounds", "1",
                    "--jobs", "1"]) == 0  # fmt: skip
    rows = [json.loads(line) for line in (tmp_path / "fetch_ab.jsonl").read_text().splitlines()]
    assert [(r["mode"], r["task"], r["passed"], r["control_warmed"]) for r in rows] == [
        ("off", "01_gelu_tanh", True, False), ("on", "01_gelu_tanh", True, True)
    ]  # fmt: skip
    assert all(r["fetch_timed"] is not None and r["fetch_bracket"] is not None for r in rows)
    assert all(r["fetch_own"] is not None and "copy_own" in r for r in rows)
    assert "control profiler" in (tmp_path / "fetch_ab.md").read_text()
    assert "warm-up: 1 verdicts" in capsys.readouterr().out  # a first pass, not in the rows
    assert "KEVIN_CONTROL_PROFILER" not in os.environ
    assert not any(r["traced_after_timing"] for r in rows)


def test_the_trace_variable_moves_the_trace_after_the_timing_in_its_on_mode(tmp_path, capsys):
    assert ab.main(["--out", str(tmp_path), "--backend", "cpp", "--tasks", "01_gelu_tanh", "--rounds", "1",
                    "--jobs", "1", "--no-warmup", "--variable", "trace"]) == 0  # fmt: skip
    rows = [json.loads(line) for line in (tmp_path / "fetch_ab.jsonl").read_text().splitlines()]
    assert [(r["mode"], r["traced_after_timing"], r["control_warmed"]) for r in rows] == [
        ("off", False, False), ("on", True, False)
    ]  # fmt: skip
    assert "trace after timing" in (tmp_path / "fetch_ab.md").read_text()
    assert "KEVIN_TRACE_AFTER_TIMING" not in os.environ


def test_an_unknown_task_or_bad_counts_are_one_line_and_exit_2(tmp_path, capsys):
    assert ab.main(["--out", str(tmp_path), "--backend", "cpp", "--tasks", "99_nothing"]) == 2
    assert capsys.readouterr().err.startswith("fetch_ab: no bundled cpp candidate for 99_nothing (have: 01_")
    assert ab.main(["--out", str(tmp_path), "--rounds", "0"]) == 2


def test_a_run_cut_after_a_pass_keeps_that_passs_rows(tmp_path, monkeypatch):
    """A GPU call's limit can end the bench mid-run: each recorded pass is in the journal as it ends."""
    monkeypatch.setenv("KEVIN_CONTROL_PROFILER", "0")  # run() sets it: restored after the test
    calls = []

    def evaluate(task, code, config):
        calls.append(task.name)
        if len(calls) > 2:  # the warm-up and the first recorded pass went through
            raise KeyboardInterrupt
        return types.SimpleNamespace(checks={}, passed=True, flags=[], stage="ok", runtime_ms=0.1)

    monkeypatch.setattr(ab, "evaluate", evaluate)
    journal = tmp_path / "fetch_ab.jsonl"
    problem = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    try:
        ab.run([("t", problem, "x")], "cpp", rounds=1, jobs=1, cache=tmp_path, journal=journal)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the second recorded pass should have been cut")
    rows = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(r["mode"], r["task"]) for r in rows] == [("off", "t")]
