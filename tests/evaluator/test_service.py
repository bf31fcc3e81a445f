"""The evaluation service: backpressure, order, progress and device round-robin (fake evaluator); and
one right and one wrong candidate through the real evaluator (cpp back end, slow)."""

from __future__ import annotations

import threading
import time

import pytest

from kevin.evaluator import service as service_module
from kevin.evaluator.evaluate import EvalConfig
from kevin.evaluator.result import EvalResult
from kevin.evaluator.service import EvaluationService
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import Task


@pytest.fixture
def fake_evaluate(monkeypatch):
    calls = []
    running = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def evaluate(task, source, config, spares=None):
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
            calls.append((source, config.device_index))
        time.sleep(0.05 if source != "slow" else 0.3)
        with lock:
            running["now"] -= 1
        return EvalResult(stage="ok", compiled=True, correct=True, task_id=task.id, error=source)

    monkeypatch.setattr(service_module, "evaluate", evaluate)
    return calls, running


def task(i: int) -> Task:
    return Task.from_source(f"# problem {i}\n", id=f"t{i}", name=f"t{i}")


def test_map_returns_results_in_submission_order(fake_evaluate):
    with EvaluationService(EvalConfig(backend="cpp"), max_in_flight=3) as service:
        results = service.map([(task(i), "slow" if i == 0 else str(i)) for i in range(6)])
    assert [r.task_id for r in results] == [f"t{i}" for i in range(6)]
    assert service.progress() == {"submitted": 6, "finished": 6, "in_flight": 0}


def test_concurrency_is_bounded(fake_evaluate):
    _, running = fake_evaluate
    with EvaluationService(EvalConfig(backend="cpp"), max_in_flight=2) as service:
        service.map([(task(i), str(i)) for i in range(8)])
    assert running["peak"] == 2


def test_submit_blocks_when_the_queue_is_full(fake_evaluate):
    with EvaluationService(EvalConfig(backend="cpp"), max_in_flight=1, max_pending=2) as service:
        started = time.monotonic()
        futures = [service.submit(task(i), "slow") for i in range(3)]  # the third waits for a slot
        waited = time.monotonic() - started
        assert waited >= 0.25
        assert all(f.result().passed for f in futures)


def test_results_as_completed_come_in_finishing_order(fake_evaluate):
    with EvaluationService(EvalConfig(backend="cpp"), max_in_flight=2) as service:
        futures = [service.submit(task(0), "slow"), service.submit(task(1), "fast")]
        order = [f.result().error for f in service.as_completed(futures)]
    assert order == ["fast", "slow"]


def test_devices_are_used_round_robin(fake_evaluate):
    calls, _ = fake_evaluate
    with EvaluationService(EvalConfig(backend="cuda"), max_in_flight=4, device_indices=[0, 1]) as service:
        service.map([(task(i), str(i)) for i in range(4)])
    assert sorted(device for _, device in calls) == [0, 0, 1, 1]


def test_bad_concurrency_is_an_error():
    with pytest.raises(ValueError, match="max_in_flight"):
        EvaluationService(EvalConfig(backend="cpp"), max_in_flight=0)


@pytest.mark.slow
def test_the_service_gives_real_verdicts_through_the_real_evaluator(cpp_matmul):
    config = EvalConfig(
        backend="cpp",
        cache_dir=str(cpp_matmul.cache),
        baseline_cache=False,
        timing=TimingConfig(budget_ms=100, warmup_ms=10),
    )
    task = Task.from_source(cpp_matmul.problem.read_text(), id="B_05", name="05_matmul")
    pairs = [(task, cpp_matmul.honest.read_text()), (task, cpp_matmul.wrong.read_text())]
    with EvaluationService(config, max_in_flight=2) as service:
        right, wrong = service.map(pairs)
    assert service.progress() == {"submitted": 2, "finished": 2, "in_flight": 0}
    assert right.stage == "ok" and right.passed and not right.flags, right.error + right.log
    assert right.speedup > 0 and right.task_id == "B_05"
    assert wrong.stage == "correctness" and wrong.compiled and not wrong.correct, wrong.error + wrong.log
    assert wrong.blame == "candidate" and "wrong output" in wrong.error and wrong.feedback
