"""bench/profile_bundled.py on the CPU with a scripted profiler: the files it writes for the GPU run
(raw report, summary, JSON report, summary.md) and its exit code."""

from __future__ import annotations

import json

from bench_scripts import load_script

from kevin.evaluator.profiling.run import ProfileReport

bench = load_script("profile_bundled_bench", "profile_bundled.py")


def test_each_task_gets_its_raw_report_summary_and_json(tmp_path, monkeypatch):
    seen = []

    def fake_profile(problem, candidate, config):
        seen.append((problem, candidate, config.backend))
        if "row_sum" in candidate or "def row_sum" in problem:
            return ProfileReport("ncu", error="ncu exited with 1: ERR_NVGPUCTRPERM", blame="infrastructure")
        return ProfileReport("ncu", summary="Profile (ncu, 3 forward calls): ...", raw='"ID","Kernel Name"\n')

    monkeypatch.setattr(bench, "profile", fake_profile)
    out = tmp_path / "profile"
    code = bench.main(
        ["--out", str(out), "--backend", "cpp", "--size", "small", "--tasks", "01_gelu_tanh,02_row_sum"]
    )
    assert code == 1  # 02 gave no profile
    assert [backend for _, _, backend in seen] == ["cpp", "cpp"]
    assert 'SIZE = "small"' in seen[0][0] and "ModelNew" in seen[0][1]
    assert (out / "01_gelu_tanh.raw.csv").read_text() == '"ID","Kernel Name"\n'
    assert (out / "01_gelu_tanh.summary.txt").read_text().startswith("Profile (ncu")
    assert json.loads((out / "02_row_sum.report.json").read_text())["blame"] == "infrastructure"
    summary = (out / "summary.md").read_text()
    assert "## 01_gelu_tanh (cpp, small): ncu" in summary
    assert "no profile (blame=infrastructure): ncu exited with 1" in summary
