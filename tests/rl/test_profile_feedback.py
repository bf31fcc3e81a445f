"""Profile feedback in episodes (EpisodeConfig.profile_feedback, kevin.rl.profiles) with a fake profiler:
off by default, appended to passed kernels' feedback only, bounded, never changing a verdict or score."""

from __future__ import annotations

import dataclasses

import pytest

from kevin.evaluator.result import EvalResult
from kevin.rl.env import EpisodeConfig, ScriptedPolicy, ThreadPoolEvaluator, run_episodes
from kevin.rl.profiles import trace_summary, with_profiles
from kevin.tasks import Task

TASK = Task.from_source("class Model:\n    pass  # task\n", id="bundled/p", name="p")


def kernel(marker: str) -> str:
    return f"```python\nclass ModelNew:\n    pass  # {marker}\n```\nsummary {marker}"


def fake_evaluate(task: Task, source: str) -> EvalResult:
    if "FAST" in source:
        return EvalResult(stage="ok", compiled=True, correct=True, speedup=2.0, feedback="correct, 2.0x")
    return EvalResult(stage="correctness", compiled=True, blame="candidate", feedback="wrong output")


class FakeProfiler:
    def __init__(self, text: str = "Profile (fake): 1 launch of 1 kernel.", fail: bool = False) -> None:
        self.text, self.fail = text, fail
        self.calls: list[str] = []

    def __call__(self, task: Task, source: str, result: EvalResult) -> str:
        self.calls.append(source)
        if self.fail:
            raise RuntimeError("ncu exploded")
        return self.text


def episodes(config: EpisodeConfig, profiler: FakeProfiler | None):
    # 2 trajectories x 2 turns: turn 1 both write the same fast kernel, turn 2 one fast, one wrong
    answers = iter([kernel("FAST"), kernel("FAST"), kernel("FAST 2"), kernel("WRONG")])
    policy = ScriptedPolicy(lambda prompt: next(answers))
    with ThreadPoolEvaluator(fake_evaluate, max_workers=2) as evaluator:
        return run_episodes([TASK], policy, evaluator, config, profiler=profiler)


def verdicts(trajectories) -> list[tuple]:
    return [
        (
            turn.result.stage,
            turn.result.correct,
            turn.result.speedup,
            turn.result.flags,
            turn.score,
            turn.advantage,
        )
        for t in trajectories
        for turn in t.turns
    ]


def test_off_by_default_and_the_profiler_is_never_called():
    profiler = FakeProfiler()
    trajectories = episodes(EpisodeConfig(trajectories=2, turns=2, backend="cpp"), profiler)
    assert profiler.calls == []
    assert [turn.result.feedback for t in trajectories for turn in t.turns] == [
        "correct, 2.0x", "correct, 2.0x", "correct, 2.0x", "wrong output",
    ]  # fmt: skip


def test_on_it_appends_to_passed_kernels_only_and_keeps_every_verdict():
    base = EpisodeConfig(trajectories=2, turns=2, backend="cpp")
    off = episodes(base, None)
    profiler = FakeProfiler()
    on = episodes(dataclasses.replace(base, profile_feedback=True), profiler)
    assert verdicts(on) == verdicts(off)
    feedback = [turn.result.feedback for t in on for turn in t.turns]
    summary = "Profile (fake): 1 launch of 1 kernel."
    assert feedback == [
        f"correct, 2.0x\n\n{summary}", f"correct, 2.0x\n\n{summary}", f"correct, 2.0x\n\n{summary}", "wrong output",
    ]  # fmt: skip
    # turn 1's identical kernels were profiled once; turn 2's one passed kernel once
    assert len(profiler.calls) == 2 and "FAST 2" in profiler.calls[1]
    # the next turn's prompt carries it
    assert summary in on[0].turns[1].prompt.text


def test_the_summary_is_bounded_and_a_failing_profiler_adds_nothing():
    config = EpisodeConfig(
        trajectories=2, turns=2, backend="cpp", profile_feedback=True, profile_max_chars=120
    )
    long = episodes(config, FakeProfiler(text="x" * 5000))
    first = long[0].turns[0].result.feedback
    assert first.startswith("correct, 2.0x\n\n") and len(first) <= len("correct, 2.0x\n\n") + 120
    assert "truncated by kevin" in first
    failing = episodes(config, FakeProfiler(fail=True))
    assert [turn.result.feedback for t in failing for turn in t.turns][0] == "correct, 2.0x"
    assert verdicts(failing) == verdicts(long)


def test_an_empty_feedback_is_filled_before_the_profile():
    result = EvalResult(stage="ok", compiled=True, correct=True, speedup=1.5)
    (out,) = with_profiles([TASK], ["src"], [result], lambda task, source, verdict: "Profile: hot.", 200)
    assert out.feedback.endswith("\n\nProfile: hot.") and "1.5" in out.feedback
    assert result.feedback == ""  # a copy: the evaluator's result is untouched


def test_the_budget_is_checked_up_front():
    with pytest.raises(ValueError, match="profile_max_chars must be at least"):
        EpisodeConfig(profile_max_chars=10)


TRACED = {
    "trace": {
        "traced_calls": 4,
        "library_share": 0.1,
        "kernels": [
            {"name": "void fused_gelu<float>(float const*, float*, long)", "whose": "custom", "launches": 4.0, "us": 400.0},
            {"name": "sm90_xmma_gemm_f32f32", "whose": "library", "launches": 4.0, "us": 40.0},
        ],
    }
}


def traced_evaluate(task: Task, source: str) -> EvalResult:
    result = fake_evaluate(task, source)
    return dataclasses.replace(result, checks=TRACED, backend="cuda", device="cuda:0")


def test_by_default_the_summary_is_the_evaluations_own_trace_and_nothing_runs_again():
    """No profiler given: the kernels the judge's confined trace kept (checks.trace.kernels), per
    forward, the library's marked; a verdict without a kernel table gets nothing."""
    answers = iter([kernel("FAST"), kernel("WRONG")])
    policy = ScriptedPolicy(lambda prompt: next(answers))
    config = EpisodeConfig(trajectories=2, turns=1, backend="cuda", profile_feedback=True)
    with ThreadPoolEvaluator(traced_evaluate, max_workers=2) as evaluator:
        (fast, wrong) = run_episodes([TASK], policy, evaluator, config)
    feedback = fast.turns[0].result.feedback
    assert feedback.startswith("correct, 2.0x\n\nProfile (the evaluator's trace, 4 forward calls): ")
    assert "8 launches of 2 kernels, 110 us GPU time per forward" in feedback, feedback
    assert "1. fused_gelu<float>: 1 launch per forward, 100 us each, 91% of GPU time" in feedback
    assert "2. sm90_xmma_gemm_f32f32 (library): 1 launch per forward, 10 us each" in feedback
    assert wrong.turns[0].result.feedback == "wrong output"
    untraced = EvalResult(stage="ok", compiled=True, correct=True, speedup=2.0, feedback="ok")
    assert trace_summary(untraced, 600) == ""
    assert len(trace_summary(traced_evaluate(TASK, "FAST"), 100)) <= 100


@pytest.mark.slow
def test_a_real_cpp_evaluation_carries_the_kernel_table_its_summary_reads():
    """The bundled cpp GELU through the real evaluator: its confined trace names the extension's
    own function, and the summary reads it (the CUDA path is the same table, of device kernels)."""
    from pathlib import Path

    from kevin.evaluator.evaluate import EvalConfig, evaluate
    from kevin.tasks import bundled_dir, load_bundled

    task = next(t for t in load_bundled() if t.name.endswith("gelu_tanh"))
    source = (Path(bundled_dir()).parent / "cpp" / "01_gelu_tanh.py").read_text()
    result = evaluate(task, source, EvalConfig(backend="cpp"))
    assert result.passed, result.explain()
    rows = result.checks["trace"]["kernels"]
    assert rows[0]["name"] == "gelu_tanh" and rows[0]["whose"] == "custom" and rows[0]["us"] > 0
    text = trace_summary(result, 600)
    assert "CPU time per forward" in text and "1. gelu_tanh: 1 call per forward" in text, text
