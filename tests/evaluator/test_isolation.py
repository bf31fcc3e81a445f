"""The judge never shares a process with candidate code (issue #13, attacks 1 and 2), on the cpp back end.

Each attack candidate is honest GELU plus the attack. Before the judge/runner split both attacks
won: the forged verdict was accepted (speedup 50,000) and cached its baseline; the spinning thread
slowed the baseline timed in its own process and that baseline was cached. These tests pin the
defence, not just a failure: the forged run is judged on its real kernel, the thread is seen
from outside (`extra_threads`), and the cached baseline is the one a clean runner measured.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kevin.evaluator.evaluate import EvalConfig, _baseline_cache_file, evaluate
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import load_tasks

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data" / "isolation"
HONEST = Path(__file__).parents[2] / "kevin" / "tasks" / "bundled" / "cpp" / "01_gelu_tanh.py"


@pytest.fixture(scope="module")
def task():
    return next(t for t in load_tasks() if t.id == "B_01")


def config(cache: Path, **changes) -> EvalConfig:
    fields = dict(
        backend="cpp",
        cache_dir=str(cache),
        lock_dir=str(cache),
        timing=TimingConfig(budget_ms=400.0, warmup_ms=20.0),
        cpu_threads=1,
        static_check=False,
    )
    return EvalConfig(**{**fields, **changes})


def cached_baseline_ms(task, cfg: EvalConfig) -> float:
    return json.loads(_baseline_cache_file(task, cfg).read_text())["stats"]["eager"]["median_ms"]


def test_a_verdict_forged_from_the_candidates_process_is_not_believed(task, tmp_path):
    cfg = config(tmp_path)
    forged = evaluate(task, (DATA / "forge_channel_python.py").read_text(), cfg)
    # Its process has no channel to the supervisor; what it wrote to the judge's socket is a broken
    # protocol, and nothing it said (0.01 ms, baseline 500 ms) became a verdict or a cache entry.
    assert "tampering" in forged.flags and not forged.passed and forged.speedup is None
    assert not _baseline_cache_file(task, cfg).exists()
    honest = evaluate(task, HONEST.read_text(), cfg)
    assert honest.stage == "ok" and honest.speedup < 1000.0
    assert cached_baseline_ms(task, cfg) == pytest.approx(honest.baseline_ms)
    assert honest.baseline_ms < 400.0


def test_a_native_thread_is_refused_at_build_whatever_the_source_calls_it(task, tmp_path):
    # std::thread: no `pthread` in the source; the library's undefined symbols give it away.
    result = evaluate(task, (DATA / "thread_spin_native.py").read_text(), config(tmp_path))
    assert result.stage == "compile" and "native threads" in result.error


def test_a_thread_is_seen_from_outside_and_never_slows_the_cached_baseline(task, tmp_path):
    clean_cfg = config(tmp_path / "clean")
    clean = evaluate(task, HONEST.read_text(), clean_cfg)
    assert clean.stage == "ok", clean.error
    spun_cfg = config(tmp_path / "spun")
    spun = evaluate(task, (DATA / "thread_spin_python.py").read_text(), spun_cfg)
    assert "extra_threads" in spun.flags
    assert not spun.passed
    # Timed after the spinning process was killed, in a runner that never loaded it: the same
    # baseline as the clean run's within timing noise (the attack made it 16x slower). A flagged
    # evaluation caches nothing.
    assert spun.baseline_ms is not None and spun.baseline_ms < 3 * cached_baseline_ms(task, clean_cfg)
    assert not _baseline_cache_file(task, spun_cfg).exists()


def _marked_processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_the_candidates_process_cannot_escape_read_other_jobs_or_hold_the_device_lock(task, tmp_path):
    from kevin.evaluator.evaluate import device_lock_path

    cfg = config(tmp_path / "cache", keep_workdir=True, workdir_root=str(tmp_path))
    source = (DATA / "escape_attempts_python.py").read_text().replace("@@LOCK@@", str(device_lock_path(cfg)))
    result = evaluate(task, source, cfg)
    (report,) = tmp_path.glob("kevin-job-*/runner1/attempts.json")
    attempts = json.loads(report.read_text())
    assert attempts["clone_parent"]["result"] == -1 and attempts["clone_parent"]["errno"] == 1  # EPERM
    assert str(attempts["sibling_jobs"]).startswith("denied")
    assert str(attempts["device_lock"]).startswith("denied")
    # The daemon is killed with the runner's PID namespace, and it fails the candidate.
    assert "left_processes" in result.flags and not result.passed
    assert _marked_processes("sleep\x00302") == [] and _marked_processes("sleep\x00301") == []


def test_a_candidate_cannot_shrink_the_shared_area_under_the_judge(task, tmp_path):
    cfg = config(tmp_path, keep_workdir=True, workdir_root=str(tmp_path))
    result = evaluate(task, (DATA / "shrink_exchange_python.py").read_text(), cfg)
    (report,) = tmp_path.glob("kevin-job-*/runner1/shrink.json")
    attempts = json.loads(report.read_text())
    assert attempts and set(attempts.values()) == {"Operation not permitted"}, attempts
    # The judge read the outputs through its mapping as usual: a verdict on the kernel.
    assert result.stage == "ok" and result.passed, result.error
