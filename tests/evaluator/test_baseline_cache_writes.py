"""The baseline cache is written by many evaluations of one process at once (the trainer keeps 12
candidates in flight, several of one task). On the H200 in session 10 two threads of one process
wrote the same task's baseline through the same temporary name (it was keyed by the process id):
one renamed the other's file away and that evaluation raised, losing a sample. Each writer needs
its own temporary file, and a cache that cannot be written must not fail the evaluation."""

from __future__ import annotations

import json
import threading

from kevin.evaluator import evaluate


def test_concurrent_writers_of_one_baseline_do_not_collide(tmp_path):
    path = tmp_path / "baselines" / "task-digest.json"
    writers, rounds = 8, 40
    errors: list[BaseException] = []
    barrier = threading.Barrier(writers)

    def write(index: int) -> None:
        for round_ in range(rounds):
            barrier.wait()
            try:
                evaluate._write_baseline(path, {"median_ms": 1.0 + index, "round": round_}, "dev")
            except BaseException as error:  # noqa: BLE001 - the test reports every failure
                errors.append(error)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, f"{len(errors)} writes failed, first: {errors[0]!r}"
    data = json.loads(path.read_text())
    assert data["stats"]["round"] == rounds - 1
    assert [p.name for p in path.parent.iterdir()] == [path.name], "temporary files left behind"


def test_a_cache_that_cannot_be_written_does_not_fail_the_evaluation(tmp_path):
    blocker = tmp_path / "baselines"
    blocker.write_text("a file where the cache's folder should be")
    evaluate._write_baseline(blocker / "task.json", {"median_ms": 1.0}, "dev")
    assert blocker.read_text().startswith("a file")
