"""The Ray evaluation service on a local CPU cluster with the cpp back end (issue #5: the Ray path
passes its CPU tests in CI). Skips where Ray is not installed (`pip install -e ".[ray]"`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevin.evaluator.evaluate import EvalConfig
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import Task

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data" / "eval"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_service_evaluates_on_actors_with_typed_results(cluster, tmp_path):
    from kevin.evaluator.ray_service import RayEvaluationService

    task = Task.from_source((DATA / "problem_scale_relu.py").read_text(), id="scale_relu", name="scale_relu")
    config = EvalConfig(
        backend="cpp",
        cache_dir=str(tmp_path / "cache"),
        lock_dir=str(tmp_path),
        static_check=False,  # so the broken candidate reaches a sandboxed worker inside the actor
        timing=TimingConfig(budget_ms=100, warmup_ms=10),
    )
    honest = (DATA / "cpp_honest.py").read_text()
    broken = "import torch\nraise RuntimeError('broken at import')\n"
    with RayEvaluationService(config, actors=2, actor_concurrency=2) as service:
        hosts = service.placement()
        results = service.map([(task, honest), (task, broken)])
    assert len(hosts) == 2 and len({h["pid"] for h in hosts}) == 2
    assert results[0].stage == "ok" and results[0].passed, results[0].error
    assert results[1].stage == "compile" and "broken at import" in results[1].error


def test_cuda_backend_needs_gpus_in_the_cluster(cluster):
    from kevin.evaluator.ray_service import RayEvaluationService

    with pytest.raises(RuntimeError, match="no GPUs"):
        RayEvaluationService(EvalConfig(backend="cuda"))
