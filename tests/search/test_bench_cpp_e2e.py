"""`kevin bench` end to end through the real evaluator (cpp back end): the replay policy answers with our
bundled honest candidate for one bundled task. Builds a real extension (about a minute on a small
CPU), hence `slow`."""

from __future__ import annotations

import json

import pytest

from kevin.evaluator.evaluate import EvalConfig, evaluate  # an import failure fails, never skips
from kevin.evaluator.result import EvalResult
from kevin.evaluator.timing import TimingConfig
from kevin.rl.env import ThreadPoolEvaluator
from kevin.rl.replay import ReplayPolicy
from kevin.search.bench import BenchConfig, run_bench
from kevin.tasks import bundled_dir, load_bundled

pytestmark = pytest.mark.slow


def test_replayed_honest_candidate_passes_on_both_turns(tmp_path):
    (task,) = [t for t in load_bundled("small") if t.id == "B_01"]
    source = (bundled_dir().parent / "cpp" / "01_gelu_tanh.py").read_text()
    answer = f"<think>One pass over the data.</think>\n```python\n{source}```\nFused the GELU chain."
    records = tmp_path / "records.jsonl"
    records.write_text(
        "".join(
            json.dumps({"task": "B_01", "trajectory": 0, "turn": turn, "completion": answer}) + "\n"
            for turn in (1, 2)
        )
    )
    config = EvalConfig(
        backend="cpp",
        cache_dir=str(tmp_path / "cache"),
        lock_dir=str(tmp_path),  # not the machine's shared CPU lock
        workdir_root=str(tmp_path),
        timing=TimingConfig(budget_ms=100, warmup_ms=10),
    )
    lines: list[str] = []
    with ThreadPoolEvaluator(lambda t, s: evaluate(t, s, config), max_workers=1) as evaluator:
        outcome = run_bench(
            [task],
            ReplayPolicy.from_file(records),
            evaluator,
            BenchConfig(trajectories=1, turns=2, backend="cpp"),
            tmp_path / "run",
            out=lines.append,
        )
    rows = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert [row["turn"] for row in rows] == [1, 2]
    for row in rows:
        verdict = row["verdict"]
        assert verdict["stage"] == "ok" and verdict["correct"], verdict["error"] + verdict["log"]
        assert EvalResult.from_dict(verdict).passed, EvalResult.from_dict(verdict).explain()
        assert verdict["speedup"] > 0 and row["score"] == pytest.approx(0.3 + verdict["speedup"])
    best = max(row["verdict"]["speedup"] for row in rows)
    overall = outcome.metrics["table1"]["overall"]
    assert overall["correct"] == 1.0 and overall["correct_best"] == 1.0
    assert overall["speedup_best"] == pytest.approx(best) and overall["geomean"] == pytest.approx(best)
    assert outcome.metrics["table1"]["upto_turn"][0]["speedup_avg"] == pytest.approx(
        rows[0]["verdict"]["speedup"]
    )
    assert "[1/1] B_01 gelu_tanh: correct 1/1, turn 1 passed 1/1" in lines[1]
    assert (tmp_path / "run" / "metrics.md").is_file() and (tmp_path / "run" / "curves.png").is_file()
