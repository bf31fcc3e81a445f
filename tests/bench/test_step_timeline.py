"""bench/step_timeline.py: a step's verdicts lined up by their timelines (checks.timeline): how long
the device was held exclusively, shared only or not at all, and how long holds were waited for."""

from __future__ import annotations

import json

import pytest
from bench_scripts import load_script

timeline = load_script("step_timeline", "step_timeline.py")


def verdict(t0, job, end, device, stages=()):
    return {
        "stage": "ok",
        "checks": {
            "timeline": {
                "t0": t0,
                "stages": [["job", job], *stages],
                "device": device,
                "end": end,
            }
        },
    }


def write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_union_counts_overlapping_holds_once():
    assert timeline.union_length([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == pytest.approx(4.0)
    assert timeline.union_length([]) == 0.0


def test_a_step_is_split_into_exclusive_shared_and_idle_device_time(tmp_path, capsys):
    # Two candidates of step 1 from a common clock at 1000 s. A: job at 1000, shared 1002-1004,
    # exclusive 1006-1007 (asked at 1004.5), ends at 1008. B: judge started at 995 (a spare), job at
    # 1001, shared 1003-1005 (asked at 1001), exclusive 1007-1009 (asked at 1005), ends at 1010.
    # Held shared: 1002-1005 (3 s); exclusively: 1006-1009 (3 s); span 1000-1010: not held 4 s.
    a = verdict(
        1000.0, 0.0, 8.0,
        [["admit", 1.0, 1.5, None], ["shared", 2.0, 2.0, 4.0], ["exclusive", 4.5, 6.0, 7.0]],
        stages=[["setup", 0.1], ["timing", 6.0]],
    )  # fmt: skip
    b = verdict(995.0, 6.0, 15.0, [["shared", 6.0, 8.0, 10.0], ["exclusive", 10.0, 12.0, 14.0]])
    # B again: a verdict reused for an identical candidate counts once. C: no timeline (older run).
    rows = [{"step": 1, "verdict": a}, {"step": 1, "verdict": b}, {"step": 1, "verdict": b}]
    rows.append({"step": 1, "verdict": {"stage": "ok", "checks": {}}})
    rl = tmp_path / "rl"
    rl.mkdir()
    write(rl / "episodes.jsonl", rows)
    write(rl / "heldout.jsonl", [{"step": 1, "verdict": verdict(2000.0, 0.0, 2.0, [])}])
    out = tmp_path / "t.json"
    assert timeline.main([str(tmp_path), "--json", str(out), "--png", str(tmp_path / "t.png")]) == 0
    figures = json.loads(out.read_text())
    step = figures["1"]
    assert step["candidates"] == 2 and step["span_s"] == pytest.approx(10.0)
    assert step["exclusive_s"] == pytest.approx(3.0) and step["shared_only_s"] == pytest.approx(3.0)
    assert step["not_held_s"] == pytest.approx(4.0)
    assert step["waits"]["exclusive"] == {"sections": 2, "median_s": 1.75, "max_s": 2.0, "sum_s": 3.5}
    assert step["waits"]["shared"]["max_s"] == pytest.approx(2.0)
    assert step["waits"]["admit"]["sections"] == 1
    assert figures["held-out 1"]["candidates"] == 1 and figures["held-out 1"]["not_held_s"] == pytest.approx(2.0)
    assert (tmp_path / "t.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].startswith("step") and "held-out 1" in printed


def test_a_run_without_timelines_or_an_unknown_step_is_a_usage_error(tmp_path, capsys):
    write(tmp_path / "episodes.jsonl", [{"step": 1, "verdict": {"stage": "ok", "checks": {}}}])
    assert timeline.main([str(tmp_path)]) == 2
    assert "no verdict" in capsys.readouterr().err
    write(tmp_path / "episodes.jsonl", [{"step": 1, "verdict": verdict(1.0, 0.0, 1.0, [])}])
    assert timeline.main([str(tmp_path), "--steps", "7"]) == 2
    assert "no step 7 here; steps: 1" in capsys.readouterr().err
    assert timeline.main([str(tmp_path / "nothing")]) == 2
