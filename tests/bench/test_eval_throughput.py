"""bench/eval_throughput.py on the CPU: the candidate set's composition, the static gate on every
candidate, the plumbing that needs no GPU (directories, order, verdicts, numbers, the report); one
`gpu` test runs a tiny slice of the real benchmark."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from bench_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "bench" / "candidates" / "throughput"


bench = load_script("eval_throughput_bench", "eval_throughput.py")
report_module = sys.modules["throughput_report"]  # its report half, loaded by the bench script


@pytest.fixture(scope="module")
def manifest():
    return bench.load_manifest()


def test_candidate_set_composition(manifest):
    assert len(manifest) >= 64
    kinds = {row["kind"] for row in manifest}
    assert kinds == {"correct", "slow", "wrong", "compile_error"}
    expected = {"correct": "correct", "slow": "correct", "wrong": "wrong", "compile_error": "compile_error"}
    for row in manifest:
        assert row["expected"] == expected[row["kind"]], row["id"]
        assert Path(row["path"]).is_file(), row["id"]
        assert row["problem"].startswith(("level1/", "level2/")), row["id"]
        if row["kind"] in ("wrong", "compile_error", "slow"):
            assert row["note"], f"{row['id']}: say what is wrong or slow"
    share = {kind: sum(r["kind"] == kind for r in manifest) / len(manifest) for kind in kinds}
    assert share["correct"] + share["slow"] >= 0.5
    assert share["wrong"] >= 0.15 and share["compile_error"] >= 0.1
    assert len({row["problem"] for row in manifest}) >= 16
    assert {row["problem"].split("/")[0] for row in manifest} == {"level1", "level2"}


def test_candidates_are_distinct_builds(manifest):
    sources = [Path(row["path"]).read_text() for row in manifest]
    assert len(set(sources)) == len(sources)
    names = [re.search(r'load_inline\(\s*name="([^"]+)"', s).group(1) for s in sources]
    assert len(set(names)) == len(names)
    for source in sources:
        assert "#include <torch/extension.h>" in source
        assert "ATen/cuda/CUDAContext.h" not in source
        assert "class ModelNew(nn.Module)" in source


def test_every_candidate_passes_the_static_gate(manifest):
    from kevin import gate as checks

    for row in manifest:
        report = checks.check_source(Path(row["path"]).read_text(), "cuda")
        assert report.ok, (row["id"], [v.message for v in report.violations])


def test_generator_reproduces_the_committed_files(manifest):
    generate = load_script("throughput_generate", "candidates/throughput/generate.py")
    rows = generate.catalogue()
    assert [r["name"] for r in rows] == [m["id"] for m in manifest]
    for row, entry in zip(rows, manifest):
        assert (CANDIDATES / entry["candidate"]).read_text() == row["source"], row["name"]
        assert row["kind"] == entry["kind"]


def test_kernelbench_dir_resolution(tmp_path, monkeypatch):
    assert bench.kernelbench_dir(str(tmp_path), {}) == tmp_path
    assert bench.kernelbench_dir(None, {"KEVIN_KERNELBENCH_DIR": "/x/kb"}) == Path("/x/kb")
    monkeypatch.setattr(bench, "REPO", tmp_path / "repo")
    assert bench.kernelbench_dir(None, {}) == tmp_path / "repo" / ".kb"
    (tmp_path / "shared" / "kernelbench_data").mkdir(parents=True)
    assert bench.kernelbench_dir(None, {}) == tmp_path / "shared" / "kernelbench_data"


def test_plain_order_covers_every_kind_early(manifest):
    order = bench.interleaved(manifest)
    assert sorted(r["id"] for r in order) == sorted(r["id"] for r in manifest)
    assert {r["kind"] for r in order[:4]} == set(bench.KINDS)
    assert {r["problem"].split("/")[0] for r in order[:8]} == {"level1", "level2"}


def test_list_problems_and_dry_run(capsys, tmp_path, manifest):
    assert bench.main(["--list-problems"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == bench.problems_needed(manifest)
    assert bench.main(["--dry-run", "--kernelbench", str(tmp_path)]) == 1  # no problem files there
    assert "missing" in capsys.readouterr().out


def test_verdicts_from_results():
    assert bench.kevin_verdict({"stage": "ok", "correct": True, "flags": []}) == "correct"
    assert bench.kevin_verdict({"stage": "ok", "correct": True, "flags": ["library_kernels"]}) == "flagged"
    assert bench.kevin_verdict({"stage": "compile"}) == "compile_error"
    assert bench.kevin_verdict({"stage": "correctness"}) == "wrong"
    assert bench.kevin_verdict({"stage": "runtime", "blame": "candidate"}) == "wrong"
    assert bench.kevin_verdict({"stage": "runtime", "blame": "infrastructure"}) == "error"
    assert bench.kevin_verdict({"stage": "static_check"}) == "rejected"
    assert bench.kevin_verdict({"stage": "timeout"}) == "timeout"
    assert bench.plain_verdict({"compiled": False}) == "compile_error"
    assert bench.plain_verdict({"compiled": True, "correct": False}) == "wrong"
    assert bench.plain_verdict({"compiled": True, "correct": True}) == "correct"
    assert bench.plain_verdict({"broken": True, "timed_out": True}) == "timeout"


def test_percentiles_and_gpu_summary():
    assert report_module.percentile([], 50) is None
    assert report_module.percentile([3.0], 90) == 3.0
    assert report_module.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert report_module.percentile([0.0, 10.0], 90) == pytest.approx(9.0)
    assert bench.gpu_summary([0.0, 50.0, 100.0, 0.0], "nvidia-smi") == {
        "source": "nvidia-smi",
        "samples": 4,
        "mean_utilization_pct": 37.5,
        "busy_share": 0.5,
    }
    assert bench.gpu_summary([], None)["busy_share"] is None


def _synthetic_report(manifest):
    rows = manifest[:4]
    kevin_rows = [
        {
            "id": rows[0]["id"],
            "verdict": "correct",
            "speedup": 0.8,
            "timing": {"build_cache_hit": False},
            "stage_seconds": {"build": 60.0, "wait_gpu": 5.0, "correctness": 1.0, "timing": 2.0},
        },
        {"id": rows[1]["id"], "verdict": "compile_error", "timing": {}, "stage_seconds": {"compile": 40.0}},
        {
            "id": rows[2]["id"],
            "verdict": "correct",
            "timing": {"build_cache_hit": True},
            "stage_seconds": {"build": 0.1, "inputs": 0.5, "timing": 2.5},
        },
        {"id": rows[3]["id"], "verdict": "not_run"},
    ]
    plain_rows = [
        {"id": rows[0]["id"], "verdict": "correct", "build_s": 70.0, "gpu_s": 3.0, "speedup": 0.7},
        {"id": rows[1]["id"], "verdict": "wrong", "build_s": 65.0, "gpu_s": 1.0},
    ]
    table = bench.verdict_table(rows, plain_rows, kevin_rows)
    return (
        rows,
        kevin_rows,
        plain_rows,
        {
            "pass": "cold",
            "command": "python bench/eval_throughput.py",
            "environment": {"gpu": "NVIDIA H200", "cores": 16, "torch": "2.11"},
            "config": {"jobs": 14},
            "gpu": bench.gpu_summary([0.0, 90.0], "nvidia-smi"),
            "kevin": {"rows": kevin_rows, "summary": bench.summarize_kevin(kevin_rows, 360.0)},
            "plain": {"rows": plain_rows, "summary": bench.summarize_plain(plain_rows, 180.0)},
            "verdicts": table,
            "agreement": bench.agreement(table),
        },
    )


def test_summaries_on_synthetic_results(manifest):
    rows, _, _, report = _synthetic_report(manifest)
    kevin = report["kevin"]["summary"]
    assert kevin["finished"] == 3 and kevin["of"] == 4
    assert kevin["candidates_per_hour"] == pytest.approx(30.0)
    assert kevin["build_s_cold"]["n"] == 2 and kevin["build_s_cold"]["p50"] == pytest.approx(50.0)
    assert kevin["build_s_cached"] == {"n": 1, "p50": 0.1, "p90": 0.1, "max": 0.1}
    assert kevin["gpu_held_s"] == pytest.approx(6.0)  # correctness + timing + inputs + timing, not wait_gpu
    # Only the cached candidate's worker recorded an inputs stage: the means are over it alone.
    assert kevin["gpu_stage_mean_s"] == {
        "candidates": 1,
        "inputs": 0.5,
        "correctness": 0.0,
        "timing": 2.5,
        "reference": 0.0,
        "baseline": 0.0,
    }
    plain = report["plain"]["summary"]
    assert plain["candidates_per_hour"] == pytest.approx(40.0)
    assert plain["build_s"]["p50"] == pytest.approx(67.5)
    agreement = report["agreement"]
    assert agreement["both_finished"] == 2 and agreement["agree"] == 1
    assert agreement["disagree"] == [rows[1]["id"]]
    assert report["verdicts"][3]["kevin"] is None and report["verdicts"][3]["agree"] is None


def test_markdown_and_summary_text(manifest):
    rows, _, _, report = _synthetic_report(manifest)
    text = bench.markdown([report])
    assert "| (a) plain load_inline, sequential | 2 | 180.0 | 40 |" in text
    assert "candidates/hour" in text and "NVIDIA H200" in text
    for row in rows:
        assert f"| {row['id']} |" in text
    assert "**no**" in text
    assert "mean s per candidate that reached it (1): inputs 0.5, correctness 0, timing 2.5" in text
    line = bench.summary_text(report)
    assert "kevin 3/4" in line and "verdicts agree 1/2" in line


def test_report_only_merges_pass_files(tmp_path, capsys, manifest):
    import json

    _, _, _, report = _synthetic_report(manifest)
    assert bench.main(["--report-only", "--out", str(tmp_path)]) == 2
    (tmp_path / "throughput_cold.json").write_text(json.dumps(report))
    (tmp_path / "throughput_cached.json").write_text(json.dumps(dict(report, **{"pass": "cached"})))
    assert bench.main(["--report-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "eval_throughput.md").read_text()
    assert "Pass `cold`" in text and "Pass `cached`" in text
    assert "pass cached" in capsys.readouterr().out
    (tmp_path / bench.NOTES_FILE).write_text("Run on the 1-GPU machine alone.\n")
    assert bench.main(["--report-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "eval_throughput.md").read_text()
    assert text.index("Run on the 1-GPU machine alone.") < text.index("Pass `cold`")


def test_cold_cache_is_only_cleared_when_ours(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "something").write_text("x")
    with pytest.raises(SystemExit):
        bench.prepare_cache(foreign, cold=True)
    ours = tmp_path / "ours"
    bench.prepare_cache(ours, cold=True)
    (ours / "builds").mkdir()
    (ours / "builds" / "old").write_text("x")
    bench.prepare_cache(ours, cold=False)
    assert (ours / "builds" / "old").exists()
    bench.prepare_cache(ours, cold=True)
    assert not (ours / "builds").exists()
    with pytest.raises(SystemExit):
        bench.prepare_cache(ours, cold=False)  # nothing cached yet


@pytest.mark.gpu
@pytest.mark.slow
def test_small_slice_on_the_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    kb = bench.kernelbench_dir()
    if not (kb / "level1" / "88_MinGPTNewGelu.py").is_file():
        pytest.skip(f"KernelBench files not found under {kb}")
    out = tmp_path / "out"
    code = bench.main(
        [
            "--out",
            str(out),
            "--only",
            "l1_88_",
            "--a-limit",
            "1",
            "--jobs",
            "4",
            # Bounded well under the suite's per-test timeout, also beside other GPU work.
            "--deadline-s",
            "300",
            "--reserve-s",
            "60",
            "--grace-s",
            "30",
            "--kernelbench",
            str(kb),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--timing-budget-ms",
            "200",
        ]
    )
    assert code == 0
    report = (out / "eval_throughput.md").read_text()
    assert "l1_88_scalar" in report


def test_a_full_plain_pass_fills_in_the_candidates_the_cold_pass_did_not_reach(manifest):
    rows, _, _, cold = _synthetic_report(manifest)
    full_rows = [
        {"id": rows[1]["id"], "verdict": "compile_error"},  # the cold pass's own (a) row wins
        {"id": rows[2]["id"], "verdict": "correct", "build_s": 60.0, "gpu_s": 2.0},
        {"id": rows[3]["id"], "verdict": "wrong"},
    ]
    plain_pass = dict(
        cold,
        **{
            "pass": "plain",
            "config": {"jobs": 14, "a_jobs": 32},
            "kevin": {"rows": [], "summary": bench.summarize_kevin([], 0.0)},
            "plain": {"rows": full_rows, "summary": bench.summarize_plain(full_rows, 100.0)},
        },
    )
    merged = {r["pass"]: r for r in bench.with_full_plain([cold, plain_pass])}
    agreement = merged["cold"]["agreement"]
    assert agreement["with_plain_pass"] and agreement["both_finished"] == 3 and agreement["agree"] == 2
    assert agreement["disagree"] == [rows[1]["id"]]
    text = bench.markdown([cold, plain_pass])
    assert "Verdicts, (a) including the `plain` pass: (a) and (b) agree on 2/3" in text
    assert "32 candidates at once" in text
    assert bench.with_full_plain([cold]) == [cold]


def test_plain_harness_judges_at_kevins_tolerance_and_records_kernelbenchs():
    torch = pytest.importorskip("torch")
    want = torch.full((64, 64), 1024.0)
    off_by_one = want - 1.0  # one term of a long dot product dropped: 1e-3 relative
    judged = bench.judge_trial(off_by_one, want)
    assert judged == {"ok": False, "ok_kernelbench": True, "max_abs_error": 1.0}
    rounding = want * (1 + 1e-6)
    assert bench.judge_trial(rounding, want)["ok"]
    broken = want.clone()
    broken[3, 5] = float("nan")
    assert bench.judge_trial(broken, want) | {"max_abs_error": 0} == {
        "ok": False,
        "ok_kernelbench": False,
        "max_abs_error": 0,
    }
    assert "shape" in bench.judge_trial(want[:2], want)["error"]
    near_miss = {"compiled": True, "correct": False, "correct_kernelbench": True}
    assert bench.plain_verdict(near_miss) == "wrong"
    assert bench.plain_verdict(near_miss, "correct_kernelbench") == "correct"


def test_report_shows_what_kernelbenchs_tolerance_would_pass(manifest):
    rows, _, _, cold = _synthetic_report(manifest)
    wrong = next(r for r in manifest if r["expected"] == "wrong")
    plain_rows = [{"id": wrong["id"], "verdict": "wrong", "kernelbench_verdict": "correct"}]
    table = bench.verdict_table(manifest, plain_rows, [])
    row = next(r for r in table if r["id"] == wrong["id"])
    assert row["plain"] == "wrong" and row["plain_kernelbench"] == "correct"
    assert report_module.agreement(table)["kernelbench_tolerance_fooled"] == [wrong["id"]]
    report = dict(cold, verdicts=table, agreement=report_module.agreement(table))
    text = report_module.markdown([report])
    assert f"(a) would pass 1 wrong candidate(s): {wrong['id']}" in text
    assert f"| {wrong['id']} | wrong | wrong | wrong | correct | - |" in text
