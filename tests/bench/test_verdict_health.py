"""bench/verdict_health.py: a run's verdicts summed up, and the disturbed timings of session 22
(figures on the 8 ms grid inside timing, calls timed at 0) counted where they were seen."""

from __future__ import annotations

import gzip
import json

from bench_scripts import load_script

health = load_script("verdict_health", "verdict_health.py")


def verdict(**fields):
    base = {
        "stage": "ok",
        "blame": "none",
        "flags": [],
        "stage_seconds": {"total": 20.0, "timing": 1.0},
        "checks": {"overhead_ms": {"candidate": {"bracket": 0.25, "clean": 0.26}}},
        "timing": {"median_ms": 0.2, "wall_median_ms": 0.45},
    }
    base.update(fields)
    return base


def write(path, verdicts, compress=False):
    rows = "".join(json.dumps({"step": 1, "verdict": v}) + "\n" for v in verdicts)
    if compress:
        with gzip.open(path, "wt") as out:
            out.write(rows)
    else:
        path.write_text(rows)


def test_disturbed_timings_are_counted_where_they_were_seen(tmp_path, capsys):
    rl = tmp_path / "rl"
    rl.mkdir()
    s22 = verdict(
        flags=["impossible_speedup"],
        checks={"overhead_ms": {"candidate": {"bracket": 7.9955, "clean": 15.9781}}},
        timing={"median_ms": 1e-6, "wall_median_ms": 0.54},
    )
    contaminated_baseline = verdict(baseline_timing={"median_ms": 7.72, "wall_median_ms": 7.98})
    # s22: a baseline whose median call was 0.46 ms and median block 8.0 ms (a slice in most blocks)
    inflated_baseline = verdict(baseline_timing={"median_ms": 7.98, "overhead_ms": 0.02, "wall_median_ms": 0.464})
    failed = verdict(
        stage="runtime",
        blame="infrastructure",
        error="the cycle overhead around the baseline's timing stayed dispersed over 3 attempts (median 4.2 ms)",
        timing=None,
    )
    write(rl / "episodes.jsonl.gz", [verdict(), s22, contaminated_baseline, failed, inflated_baseline], compress=True)
    pinned = verdict(
        checks={"timing_cores": {"judge": 15, "runners": 14}, "timing_attempts": {"candidate": [9.1, 0.4]}}
    )
    kept = verdict(checks={"timing_cores": {"judge": 15, "runners": 14, "kept": True}})
    write(rl / "heldout.jsonl", [pinned, kept, verdict(checks={"timing_cores": "unpinned (EPERM)"})])
    assert health.main([str(tmp_path), "--json", str(tmp_path / "h.json")]) == 0
    summary = json.loads((tmp_path / "h.json").read_text())
    assert summary["verdicts"] == 8
    assert summary["outcomes"] == {"ok / none": 7, "runtime / infrastructure": 1}
    assert summary["flags"] == {"impossible_speedup": 1}
    assert summary["grid_figures"] == {"bracket (candidate)": 1, "clean (candidate)": 1, "baseline cycles": 1}
    assert summary["timed_at_zero"] == {"candidates": 1, "baselines": 0}
    assert summary["timing_cores"] == {"pinned": 1, "pinned, kept": 1, "unpinned (EPERM)": 1}
    assert summary["timings_retried"] == {"retried": 1, "timed": 8}
    assert summary["blocks_inflated"] == {"candidates": 0, "baselines": 1}
    assert summary["infrastructure"] == {
        "the cycle overhead around the baseline's timing stayed dispersed over 3 attempts": 1
    }
    assert summary["out_of_memory"] == {"by_blame": {}, "rerun_alone": 0}
    assert summary["stage_seconds"]["total"] == {"n": 8, "median": 20.0, "p90": 20.0, "max": 20.0}
    # Time in no stage the worker named (a spare still booting when its job came).
    assert summary["stage_seconds"]["unstaged"] == {"n": 8, "median": 19.0, "p90": 19.0, "max": 19.0}
    printed = capsys.readouterr().out
    assert "bracket (candidate) 1" in printed and "timed at 0 (1e-6 ms): 1 candidates" in printed
    assert "candidate timings retried (dispersed): 1 of 8" in printed
    assert "blocks inflated by frequent slow calls: 0 candidates, 1 baselines" in printed


def test_a_directory_without_episodes_is_a_usage_error(tmp_path, capsys):
    assert health.main([str(tmp_path)]) == 2
    assert "no episodes.jsonl" in capsys.readouterr().err


def test_the_brackets_two_sides_and_the_retimed_references_are_summed_up(tmp_path, capsys):
    """s30: small references at ~0 against their bracket. Slower before the calls than after them
    in most verdicts would say the device was still warming up when they were timed."""
    rl = tmp_path / "rl"
    rl.mkdir()
    warming = {"candidate": [[0.0440, 0.0400]], "baseline": [[0.0412, 0.0400], [0.0401, 0.0400]]}
    steady = {"candidate": [[0.0400, 0.0401]]}
    retimed = [{"median_ms": 1e-6, "wall_median_ms": 0.0412, "wall_min_ms": 0.0398, "overhead_ms": 0.0419}]
    rows = [
        verdict(checks={"bracket_sides_ms": warming, "reference_retimed": retimed}),
        verdict(checks={"bracket_sides_ms": steady}),
        verdict(),
    ]
    write(rl / "episodes.jsonl", rows)
    assert health.main([str(tmp_path), "--json", str(tmp_path / "h.json")]) == 0
    summary = json.loads((tmp_path / "h.json").read_text())
    assert summary["bracket_sides"] == {
        "candidate": {"n": 2, "median_before_over_after": 1.0488, "before_slower_2pct": 1},
        "baseline": {"n": 2, "median_before_over_after": 1.0162, "before_slower_2pct": 1},
    }
    assert summary["references_retimed"] == 1
    printed = capsys.readouterr().out
    assert "candidate 1.0488 (1 of 2)" in printed
    assert "references timed again under their bandwidth floor: 1" in printed


def test_device_out_of_memory_is_counted_by_blame_with_the_reruns_alone(tmp_path, capsys):
    """s34's H100 run: kevin's own calibrations ran out of device memory (blamed on kevin)."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 128.00 MiB."
    calibration = "kevin's runner failed to calibrate: " + oom
    ours = verdict(stage="runtime", blame="infrastructure", error=calibration)
    theirs = verdict(stage="runtime", blame="candidate", error=oom)
    alone = verdict(checks={"retried_alone_after": "out of memory beside other workers"})
    (tmp_path / "rl").mkdir()
    write(tmp_path / "rl" / "episodes.jsonl", [ours, ours, theirs, alone, verdict()])
    assert health.main([str(tmp_path), "--json", str(tmp_path / "h.json")]) == 0
    summary = json.loads((tmp_path / "h.json").read_text())
    assert summary["out_of_memory"] == {"by_blame": {"infrastructure": 2, "candidate": 1}, "rerun_alone": 1}
    printed = capsys.readouterr().out
    assert "device out of memory: infrastructure 2, candidate 1; rerun alone after one: 1" in printed


def test_float64_passes_and_the_fetch_excess_are_summed_up(tmp_path, capsys):
    """s42's two measures to read at the next GPU run: trials passed only against the float64
    reference, and how far timed fetches ran over the clean one (deferred_work's measure)."""
    rl = tmp_path / "rl"
    rl.mkdir()
    rows = [
        verdict(correctness={"passed_against_float64": [6]}, checks={"fetch_excess_ms": 0.02}),
        verdict(checks={"fetch_excess_ms": -0.01}),
        verdict(flags=["deferred_work"], checks={"fetch_excess_ms": 0.4}),
        verdict(stage="correctness", correctness={"trials": 1}),
    ]
    write(rl / "heldout.jsonl", rows)
    assert health.main([str(tmp_path), "--json", str(tmp_path / "h.json")]) == 0
    summary = json.loads((tmp_path / "h.json").read_text())
    assert summary["passed_against_float64"] == 1
    assert summary["fetch_excess_ms"] == {"n": 3, "median": 0.02, "p90": 0.02, "max": 0.4}
    out = capsys.readouterr().out
    assert "correct against the float64 reference only: 1" in out
    assert "(ms; deferred_work 1): median 0.02, p90 0.02, max 0.4 of 3" in out


def test_traces_device_records_are_counted_against_their_launch_calls(tmp_path, capsys):
    """s44: to read at the next GPU run whether a look loses some of its device records (fewer than
    its launches) and not only all of them (`blind`)."""
    rl = tmp_path / "rl"
    rl.mkdir()
    traced = lambda **trace: verdict(checks={"trace": trace})  # noqa: E731
    rows = [
        traced(device_activities=24, launch_calls=24),
        traced(device_activities=20, launch_calls=24),
        traced(device_activities=30, launch_calls=2),
        traced(blind=True, launch_calls=16),
        traced(library_share=0.1),  # made before s43: no launch count
        verdict(stage="compile"),
    ]
    write(rl / "episodes.jsonl", rows)
    assert health.main([str(tmp_path), "--json", str(tmp_path / "h.json")]) == 0
    summary = json.loads((tmp_path / "h.json").read_text())
    assert summary["trace_records"] == {"equal": 1, "fewer": 1, "more": 1, "blind": 1}
    assert "equal 1, fewer (records lost) 1, more 1, blind 1" in capsys.readouterr().out
