"""A candidate caught by what it did is scored 0 as its own failure even when kevin fails later in
the same evaluation (s44's H100 table: state_mutate_input_cuda, flagged `inputs_mutated`, came back
the infrastructure's, which trainers drop unscored, when its timing could not be taken steadily)."""

from __future__ import annotations

import pytest

from kevin.evaluator.evaluate import EvalConfig, outcome_to_result
from kevin.evaluator.result import BLOCKING_FLAGS, EVIDENCE_FLAGS
from kevin.evaluator.sandbox import WorkerOutcome

UNSTEADY = "the cycle overhead around the candidate's timing stayed dispersed over 3 attempts"
COMMON = {"backend": "cpp", "precision": "fp32", "task_id": "t"}


def verdict(flags, leftover_processes=0):
    report = {"stage": "runtime", "blame": "infrastructure", "error": UNSTEADY, "flags": list(flags)}
    outcome = WorkerOutcome(
        result=report, last_stage="timing", returncode=0, leftover_processes=leftover_processes
    )
    return outcome_to_result(outcome, EvalConfig(backend="cpp"), COMMON)


@pytest.mark.parametrize("flag", sorted(EVIDENCE_FLAGS - {"left_processes"}))
def test_a_flag_of_the_candidates_own_doing_makes_a_later_failure_of_kevins_the_candidates(flag):
    result = verdict([flag, flag])
    assert result.blame == "candidate" and not result.passed
    assert result.error.startswith(f"the candidate was caught ({flag}) before kevin's own failure: ")
    assert UNSTEADY in result.error


def test_processes_left_behind_count_as_the_candidates_doing():
    result = verdict([], leftover_processes=1)
    assert result.blame == "candidate" and "left_processes" in result.error


@pytest.mark.parametrize("flags", [[], ["deferred_work"], ["impossible_speedup", "library_kernels"]])
def test_flags_a_disturbance_can_raise_leave_kevins_failure_its_own(flags):
    result = verdict(flags)
    assert result.blame == "infrastructure" and result.error == UNSTEADY


def test_evidence_flags_block():
    assert EVIDENCE_FLAGS <= BLOCKING_FLAGS
