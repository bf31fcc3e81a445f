"""`kevin eval-batch`: manifest reading, durable appends, resume, the table (fake evaluator); and one
run of the command through the real evaluator (cpp back end, slow)."""

from __future__ import annotations

import json

import pytest

from kevin.cli import main
from kevin.evaluator import service as service_module
from kevin.evaluator.batch import Pair, bundled_pairs, done_ids, format_table, read_manifest, run_batch
from kevin.evaluator.evaluate import EvalConfig
from kevin.evaluator.result import EvalResult


@pytest.fixture
def evaluated(monkeypatch):
    seen = []

    def evaluate(task, source, config, spares=None):
        seen.append(task.id)
        if "wrong" in source:
            return EvalResult(stage="correctness", compiled=True, error="wrong", task_id=task.id)
        return EvalResult(
            stage="ok",
            compiled=True,
            correct=True,
            speedup=2.0,
            runtime_ms=1.0,
            baseline_ms=2.0,
            task_id=task.id,
        )

    monkeypatch.setattr(service_module, "evaluate", evaluate)
    return seen


@pytest.fixture
def manifest(tmp_path):
    (tmp_path / "p.py").write_text("# problem\n")
    (tmp_path / "good.py").write_text("# good\n")
    (tmp_path / "bad.py").write_text("# wrong\n")
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        '{"id": "a", "problem": "p.py", "candidate": "good.py"}\n'
        '{"id": "b", "problem": "p.py", "candidate": "bad.py"}\n'
    )
    return path


def test_read_manifest_resolves_paths_relative_to_it(manifest):
    pairs = read_manifest(manifest)
    assert [p.id for p in pairs] == ["a", "b"] and pairs[0].candidate == manifest.parent / "good.py"


def test_duplicate_ids_are_rejected(manifest):
    manifest.write_text(manifest.read_text() + '{"id": "a", "problem": "p.py", "candidate": "good.py"}\n')
    with pytest.raises(Exception, match="appears twice"):
        read_manifest(manifest)


def test_results_are_appended_and_a_rerun_skips_done_ids(manifest, tmp_path, evaluated):
    out = tmp_path / "out" / "results.jsonl"
    rows = run_batch(read_manifest(manifest), out, EvalConfig(backend="cpp"), jobs=2, progress=False)
    assert {r["id"]: r["stage"] for r in rows} == {"a": "ok", "b": "correctness"}
    assert done_ids(out) == {"a", "b"}
    evaluated.clear()
    again = run_batch(read_manifest(manifest), out, EvalConfig(backend="cpp"), jobs=2, progress=False)
    assert evaluated == [] and len(again) == 2


def test_a_line_cut_short_by_a_crash_is_evaluated_again(manifest, tmp_path, evaluated):
    out = tmp_path / "results.jsonl"
    out.write_text(json.dumps({"id": "a", "stage": "ok"}) + "\n" + '{"id": "b", "sta')
    run_batch(read_manifest(manifest), out, EvalConfig(backend="cpp"), jobs=1, progress=False)
    assert evaluated == ["b"]


def test_table_counts_passed_rows(manifest, tmp_path, evaluated):
    rows = run_batch(
        read_manifest(manifest), tmp_path / "r.jsonl", EvalConfig(backend="cpp"), jobs=1, progress=False
    )
    table = format_table(rows)
    assert "1/2 correct" in table and "2.000" in table


def test_cli_runs_a_manifest(manifest, tmp_path, evaluated, capsys):
    out = tmp_path / "cli.jsonl"
    assert (
        main(["eval-batch", "--manifest", str(manifest), "--out", str(out), "--backend", "cpp", "--quiet"])
        == 0
    )
    assert "1/2 correct" in capsys.readouterr().out


def test_bundled_pairs_cover_every_bundled_task():
    for backend in ("cpp", "cuda"):
        pairs = bundled_pairs(backend)
        assert len(pairs) >= 12 and all(isinstance(p, Pair) and p.candidate.is_file() for p in pairs)


@pytest.mark.slow
def test_eval_batch_gives_real_verdicts_through_the_real_evaluator(cpp_matmul, tmp_path, capsys):
    manifest = tmp_path / "pairs.jsonl"
    rows = [
        {"id": "right", "problem": str(cpp_matmul.problem), "candidate": str(cpp_matmul.honest)},
        {"id": "wrong", "problem": str(cpp_matmul.problem), "candidate": str(cpp_matmul.wrong)},
    ]
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "results.jsonl"
    argv = ["eval-batch", "--manifest", str(manifest), "--out", str(out), "--backend", "cpp", "--quiet"]
    argv += ["--cache-dir", str(cpp_matmul.cache), "--no-baseline-cache", "--timing-budget-ms", "100"]
    assert main(argv) == 0
    results = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    right, wrong = EvalResult.from_dict(results["right"]), EvalResult.from_dict(results["wrong"])
    assert right.stage == "ok" and right.passed and not right.flags, right.error + right.log
    assert right.speedup > 0 and right.runtime_ms > 0 and right.baseline_ms > 0
    assert wrong.stage == "correctness" and wrong.compiled and not wrong.correct, wrong.error + wrong.log
    assert wrong.blame == "candidate" and "wrong output" in wrong.error
    assert "1/2 correct" in capsys.readouterr().out
