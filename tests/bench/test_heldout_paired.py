"""bench/heldout_paired.py: a held-out step against the start, pair by pair, with hand-worked numbers."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from bench_scripts import load_script

paired = load_script("heldout_paired", "heldout_paired.py")


def row(step, task, trajectory, speedup, text="k"):
    """A one-turn trajectory: passed at `speedup`, or failed when speedup is None."""
    verdict = {"stage": "ok", "correct": speedup is not None, "speedup": speedup, "blame": "none"}
    return {
        "step": step,
        "task": task,
        "trajectory": trajectory,
        "turn": 1,
        "verdict": verdict,
        "candidate": text,
    }


def test_the_sign_test_matches_the_binomial_by_hand():
    assert paired.sign_test(0, 0) == 1.0
    assert paired.sign_test(4, 0) == pytest.approx(2 / 16)  # 2 * (1/2)^4
    assert paired.sign_test(0, 13) == pytest.approx(2 / 2**13)
    assert paired.sign_test(6, 3) == pytest.approx(2 * (1 + 9 + 36 + 84) / 512)  # 0.508, s22 step 19
    assert paired.sign_test(3, 3) == 1.0


def test_pairs_differences_and_the_task_bootstrap_by_hand():
    """Two tasks x 2 trajectories. Start: a passes at 1.0 and fails; b passes at 2.0 twice.
    Step 8: a passes at 1.5 (same seed, new text) and at 1.0 (gained); b at 2.0 (same text) and fails
    (lost). Differences: a +0.5, +1.0; b 0, -2.0: mean -0.125."""
    rows = [
        row(0, "a", 0, 1.0, "a0"), row(0, "a", 1, None, "a1"), row(0, "b", 0, 2.0, "b0"), row(0, "b", 1, 2.0, "b1"),
        row(8, "a", 0, 1.5, "a0'"), row(8, "a", 1, 1.0, "a1'"), row(8, "b", 0, 2.0, "b0"), row(8, "b", 1, None, "b1'"),
    ]  # fmt: skip
    (record,) = paired.compare(rows, resamples=2000)
    assert record["step"] == 8 and record["base"] == 0 and record["pairs"] == 4 and record["tasks"] == 2
    assert record["same"] == 1
    assert (record["correct_base"], record["correct"]) == (0.75, 0.75)
    assert (record["gained"], record["lost"], record["p"]) == (1, 1, 1.0)
    assert record["speedup_base"] == pytest.approx(5.0 / 4) and record["speedup"] == pytest.approx(4.5 / 4)
    assert record["speedup_diff"] == pytest.approx(-0.125)
    # Resampling whole tasks: the mean is a's (+0.75), b's (-1.0) or both (-0.125): the interval's
    # ends are the two one-task means, never a mix of single samples.
    low, high = record["speedup_diff_95"]
    assert low == pytest.approx(-1.0) and high == pytest.approx(0.75)
    assert paired.beyond_chance(record) == 0


def test_a_rise_and_a_fall_beyond_chance_are_named(tmp_path, capsys):
    rows = []
    for t in range(10):  # every pair gains 0.5 at step 4 and loses its kernel at step 9
        rows += [row(0, f"t{t}", 0, 1.0), row(4, f"t{t}", 0, 1.5), row(9, f"t{t}", 0, None)]
    (tmp_path / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert paired.main([str(tmp_path), "--resamples", "500", "--json", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "a rise beyond chance at step(s) 4" in out and "a fall beyond chance at step(s) 9" in out
    rise, fall = json.loads((tmp_path / "p.json").read_text())
    assert rise["speedup_diff_95"] == [pytest.approx(0.5), pytest.approx(0.5)]
    assert (fall["lost"], fall["p"]) == (10, pytest.approx(2 / 2**10))
    assert math.isclose(fall["speedup_diff"], -1.0)


def test_a_step_judged_on_another_gpu_is_listed_but_counts_neither_way(tmp_path, capsys):
    """Session 34: a run carried from the H200 to an H100 read a rise at every H100 step against the
    H200's start; the H100's speedups were higher for the same kernels (step 5: 0.947 and 1.087)."""
    rows = []
    for t in range(10):  # the same kernels, faster on the second machine; step 9 loses them all there
        rows += [row(0, f"t{t}", 0, 1.0), row(4, f"t{t}", 0, 1.5), row(9, f"t{t}", 0, None)]
    for r in rows:
        r["verdict"]["device"] = "NVIDIA H200" if r["step"] < 9 else "NVIDIA H100 80GB HBM3"
    assert paired.machines(rows) == {0: "NVIDIA H200", 4: "NVIDIA H200", 9: "NVIDIA H100 80GB HBM3"}
    rise, fall = paired.compare(rows, resamples=500)
    assert (rise["machine"], fall["machine"], fall["machine_base"]) == (
        "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA H200"
    )  # fmt: skip
    assert paired.beyond_chance(rise) == 1 and paired.beyond_chance(fall) == 0
    text = paired.render([rise, fall])
    assert "a rise beyond chance at step(s) 4" in text and "fall" not in text
    assert "\n  9*    10" in text and "the base on NVIDIA H200" in text
    assert paired.render([fall]).splitlines()[-1].startswith("* judged on NVIDIA H100 80GB HBM3")
    # Rows with no device named (older runs, the CPU's tests) pair as before.
    for r in rows:
        del r["verdict"]["device"]
    assert paired.beyond_chance(paired.compare(rows, resamples=500)[1]) == -1


def test_rescored_rows_replace_their_steps_rows(tmp_path, capsys):
    """The start judged again by a later evaluator: its rows, not the old ones, are the base."""
    rows, rescored = [], []
    for t in range(10):
        rows += [row(0, f"t{t}", 0, None), row(4, f"t{t}", 0, 1.0)]  # failed at the start, first judged
        rescored.append(row(0, f"t{t}", 0, 1.0))  # passed at 1.0 when judged again
    (tmp_path / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "rescored.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rescored))
    assert paired.main([str(tmp_path), "--resamples", "200", "--json", str(tmp_path / "a.json")]) == 0
    (alone,) = json.loads((tmp_path / "a.json").read_text())
    assert alone["gained"] == 10
    argv = [str(tmp_path), "--rescored", str(tmp_path / "rescored.jsonl"), "--resamples", "200"]
    assert paired.main([*argv, "--json", str(tmp_path / "b.json")]) == 0
    (again,) = json.loads((tmp_path / "b.json").read_text())
    assert (again["gained"], again["lost"], again["correct_base"]) == (0, 0, 1.0)
    assert again["speedup_diff"] == pytest.approx(0.0)
    capsys.readouterr()
    assert paired.main([str(tmp_path), "--rescored", str(tmp_path / "missing.jsonl")]) == 2
    assert "no " in capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert paired.main([str(tmp_path)]) == 2
    assert "no " in capsys.readouterr().err
    (tmp_path / "heldout.jsonl").write_text(json.dumps(row(0, "a", 0, 1.0)) + "\n")
    assert paired.main([str(tmp_path), "--base", "3"]) == 2
    assert "no held-out rows at step 3" in capsys.readouterr().err


def test_a_committed_run_read_from_its_gzipped_heldout_file(tmp_path, capsys):
    """Committed results keep large JSONL gzipped (heldout.jsonl.gz): the run directory still reads."""
    rows = []
    for t in range(10):
        rows += [row(0, f"t{t}", 0, 1.0), row(4, f"t{t}", 0, 1.5)]
    (tmp_path / "heldout.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert paired.main([str(tmp_path), "--resamples", "200", "--json", str(tmp_path / "p.json")]) == 0
    (record,) = json.loads((tmp_path / "p.json").read_text())
    assert (record["pairs"], record["gained"], record["lost"]) == (10, 0, 0)
    assert record["speedup_diff"] == pytest.approx(0.5)
    assert "a rise beyond chance at step(s) 4" in capsys.readouterr().out
