"""Whole episodes on CPU with a scripted policy and a fake evaluator (kevin.rl.env, kevin.rl.episodes)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import replace

import pytest

from kevin.evaluator.result import EvalResult
from kevin.rl.env import (
    EpisodeConfig,
    Generation,
    Sampling,
    ScriptedPolicy,
    ThreadPoolEvaluator,
    run_episodes,
    smoke,
    stream_completions,
)
from kevin.rl.episodes import EPISODES_FILE, episode_rows, read_episodes, write_episodes
from kevin.rl.prompts import Attempt, render_prompt
from kevin.tasks import Task

TASK_A = Task.from_source("class Model:\n    pass  # task A\n", id="bundled/a", name="a")
TASK_B = Task.from_source("class Model:\n    pass  # task B\n", id="bundled/b", name="b")
EXAMPLE_MARK = "Here is an example."


def answer(marker: str, summary: str = "", filler: str = "") -> str:
    """A well-formed completion whose kernel carries `marker` for the fake evaluator."""
    summary = summary or f"summary of {marker}"
    return f"<think>SECRET reasoning {marker}</think>\n```python\nclass ModelNew:\n    pass  # {marker}{filler}\n```\n{summary}"


def fake_evaluate(task: Task, source: str) -> EvalResult:
    """Verdict by marker: SPEEDUP=x passes, WRONG / NOCOMPILE fail, EVALUATOR-BUG raises."""
    if "EVALUATOR-BUG" in source:
        raise RuntimeError("worker pool is gone")
    if "SPEEDUP=" in source:
        speedup = float(source.split("SPEEDUP=")[1].split()[0])
        return EvalResult(
            stage="ok", compiled=True, correct=True, speedup=speedup, feedback=f"correct, {speedup}x"
        )
    if "NOCOMPILE" in source:
        return EvalResult(
            stage="compile", error="expected ';'", blame="candidate", feedback="compile error: expected ';'"
        )
    return EvalResult(
        stage="correctness", compiled=True, blame="candidate", feedback="wrong output: max abs error 3.0"
    )


class CountingEvaluator(ThreadPoolEvaluator):
    def __init__(self) -> None:
        super().__init__(fake_evaluate, max_workers=2)
        self.submitted: list[tuple[str, str]] = []

    def submit(self, task, candidate_source):
        self.submitted.append((task.id, candidate_source))
        return super().submit(task, candidate_source)


def script(*completions: str) -> ScriptedPolicy:
    """A policy that answers prompts in order, batch after batch."""
    remaining = iter(completions)
    return ScriptedPolicy(lambda prompt: next(remaining))


def run(tasks, policy, config, **kwargs):
    with CountingEvaluator() as evaluator:
        trajectories = run_episodes(tasks, policy, evaluator, config, **kwargs)
    return trajectories, evaluator


def test_whole_episode_number_by_number():
    # batch order: task A trajectories 0 and 1, then task B trajectories 0 and 1
    policy = script(
        "I have no code for you.", answer("SPEEDUP=1.0"), "nothing", "nothing",  # turn 1
        answer("WRONG", "tried a fused loop"), answer("SPEEDUP=1.5"), "nothing", "nothing",  # turn 2
        answer("SPEEDUP=2.0"), answer("NOCOMPILE"), "nothing", "nothing",  # turn 3
    )  # fmt: skip
    config = EpisodeConfig(trajectories=2, turns=3, backend="cpp")
    trajectories, evaluator = run([TASK_A, TASK_B], policy, config)

    assert [len(batch) for batch in policy.batches] == [4, 4, 4]  # all trajectories' turn t in one batch
    assert policy.samplings[0].temperature == 0.9 and policy.samplings[0].max_tokens == 16384
    assert len(evaluator.submitted) == 5  # format errors never reach the evaluator
    assert [(t.task.id, t.index, len(t.turns)) for t in trajectories] == [
        ("bundled/a", 0, 3), ("bundled/a", 1, 3), ("bundled/b", 0, 3), ("bundled/b", 1, 3),
    ]  # fmt: skip
    a0, a1, b0, b1 = trajectories
    assert [turn.result.stage for turn in a0.turns] == ["format", "correctness", "ok"]
    assert [turn.result.stage for turn in a1.turns] == ["ok", "ok", "compile"]
    assert a0.turns[0].result.blame == "policy"

    # scores 0.3 + speedup when passed; returns with gamma 0.4:
    # a0 [0, 0, 2.3] -> [0.368, 0.92, 2.3]; a1 [1.3, 1.8, 0] -> [2.02, 1.8, 0]
    assert [turn.score for turn in a0.turns] == pytest.approx([0.0, 0.0, 2.3])
    assert [turn.score for turn in a1.turns] == pytest.approx([1.3, 1.8, 0.0])
    assert [turn.discounted_return for turn in a0.turns] == pytest.approx([0.368, 0.92, 2.3])
    assert [turn.discounted_return for turn in a1.turns] == pytest.approx([2.02, 1.8, 0.0])
    # task A's group is its 6 samples: mean 1.234667, population std 0.860795
    assert [turn.advantage for turn in a0.turns] == pytest.approx([-1.006821, -0.365553, 1.237615], abs=1e-6)
    assert [turn.advantage for turn in a1.turns] == pytest.approx([0.912334, 0.656757, -1.434332], abs=1e-6)
    # task B only made format errors: zero spread, advantage 0, still trainable
    assert all(turn.advantage == 0.0 and turn.trainable for turn in b0.turns + b1.turns)

    # prompts: example in turn 1 only; feedback and summaries carried; reasoning never carried
    first, second, third = (turn.prompt.text for turn in a0.turns)
    assert EXAMPLE_MARK in first and EXAMPLE_MARK not in second and EXAMPLE_MARK not in third
    assert "### Attempt 1\nNo code could be taken from this attempt." in second
    assert "Feedback: Format error: the answer has no fenced code block." in second
    assert "pass  # WRONG" in third and "Your summary: tried a fused loop" in third
    assert "Feedback: wrong output: max abs error 3.0" in third
    assert "Restart your reasoning" in third
    a1_last = a1.turns[2].prompt.text
    assert "Feedback: correct, 1.0x" in a1_last and "Feedback: correct, 1.5x" in a1_last
    assert "# task B" not in a1_last
    assert not any("SECRET" in turn.prompt.text for t in trajectories for turn in t.turns)
    assert [turn.prompt.turn for turn in a0.turns] == [1, 2, 3]


def test_records_round_trip(tmp_path):
    policy = script(answer("WRONG"), answer("SPEEDUP=2.0"))
    trajectories, _ = run([TASK_A], policy, EpisodeConfig(trajectories=1, turns=2, backend="cpp"))
    path = tmp_path / "run" / EPISODES_FILE
    assert write_episodes(path, trajectories, step=7) == 2
    assert write_episodes(path, trajectories, step=8) == 2  # appends
    rows = read_episodes(tmp_path / "run")  # a run directory works too
    assert len(rows) == 4 and [row["step"] for row in rows] == [7, 7, 8, 8]
    first, second = rows[:2]
    assert (first["task"], first["trajectory"], first["turn"]) == ("bundled/a", 0, 1)
    assert first["task_hash"] == TASK_A.hash and len(first["prompt_hash"]) == 16
    assert first["completion"] == answer("WRONG") and "# WRONG" in first["candidate"]
    assert first["summary"] == "summary of WRONG"
    assert first["verdict"]["stage"] == "correctness" and second["verdict"]["speedup"] == 2.0
    # scores [0, 2.3]; returns [0.92, 2.3]; advantages (population std 0.69) [-1, 1]
    assert [row["score"] for row in rows[:2]] == pytest.approx([0.0, 2.3])
    assert [row["return"] for row in rows[:2]] == pytest.approx([0.92, 2.3])
    assert [row["advantage"] for row in rows[:2]] == pytest.approx([-1.0, 1.0])
    assert first["trainable"] and first["finish_reason"] is None and first["attempts_dropped"] == 0
    assert episode_rows(trajectories, step=7) == rows[:2]
    (tmp_path / "bad.jsonl").write_text('{"step": 0}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2: not valid JSON"):
        read_episodes(tmp_path / "bad.jsonl")


def test_keep_refining_after_correct_is_the_default():
    policy = script(answer("SPEEDUP=1.0"), answer("SPEEDUP=1.2"), answer("SPEEDUP=1.1"))
    trajectories, _ = run([TASK_A], policy, EpisodeConfig(trajectories=1, turns=3, backend="cpp"))
    assert len(trajectories[0].turns) == 3
    assert "correct, 1.0x" in trajectories[0].turns[1].prompt.text


def test_stop_after_correct():
    policy = script(
        answer("SPEEDUP=1.0"), answer("WRONG"),  # turn 1: trajectory 0 passes
        answer("WRONG"),  # turn 2: only trajectory 1 is asked
        answer("SPEEDUP=3.0"),  # turn 3
    )  # fmt: skip
    config = EpisodeConfig(trajectories=2, turns=4, backend="cpp", stop_after_correct=True)
    trajectories, _ = run([TASK_A], policy, config)
    assert [len(batch) for batch in policy.batches] == [2, 1, 1]  # everyone done after turn 3
    assert [len(t.turns) for t in trajectories] == [1, 3]
    # returns: [1.3]; [0 + 0.4 * 0 + 0.16 * 3.3, 0.4 * 3.3, 3.3] = [0.528, 1.32, 3.3]
    assert [turn.discounted_return for turn in trajectories[1].turns] == pytest.approx([0.528, 1.32, 3.3])
    assert trajectories[0].turns[0].discounted_return == pytest.approx(1.3)


def test_evaluator_failure_is_infrastructure_and_not_trained():
    policy = script(answer("EVALUATOR-BUG"), answer("WRONG"), answer("SPEEDUP=1.0"), answer("SPEEDUP=2.0"))
    trajectories, _ = run([TASK_A], policy, EpisodeConfig(trajectories=2, turns=2, backend="cpp"))
    crashed = trajectories[0].turns[0]
    assert crashed.result.blame == "infrastructure" and "worker pool is gone" in crashed.result.error
    assert crashed.score is None and crashed.discounted_return is None and crashed.advantage is None
    assert not crashed.trainable
    assert "failure on our side" in trajectories[0].turns[1].prompt.text
    # trainable samples: t0 turn 2 (1.3), t1 [0 + 0.4 * 2.3 = 0.92, 2.3]; group mean 1.506667,
    # population std 0.582027
    assert trajectories[0].turns[1].discounted_return == pytest.approx(1.3)
    assert [turn.discounted_return for turn in trajectories[1].turns] == pytest.approx([0.92, 2.3])
    assert trajectories[0].turns[1].advantage == pytest.approx(-0.355081, abs=1e-6)
    assert [turn.advantage for turn in trajectories[1].turns] == pytest.approx(
        [-1.007971, 1.363052], abs=1e-6
    )


def test_a_completion_the_sampler_failed_on_is_infrastructure_and_never_evaluated():
    # finish_reason "error": the sampler's logits stopped being finite (kevin.train.policy_hf), so the
    # text is not the model's; it must not be evaluated, scored or trained on.
    failed = Generation(answer("SPEEDUP=9.0"), finish_reason="error")
    policy = script(failed, answer("SPEEDUP=1.0"))
    trajectories, evaluator = run([TASK_A], policy, EpisodeConfig(trajectories=2, turns=1, backend="cpp"))
    broken, fine = (t.turns[0] for t in trajectories)
    assert broken.result.blame == "infrastructure" and broken.score is None and not broken.trainable
    assert fine.score is not None and fine.result.correct
    assert [source for _, source in evaluator.submitted] == [fine.parsed.candidate]


class SilentEvaluator:
    """Never answers: every future stays pending."""

    def submit(self, task, candidate_source):
        return Future()


def test_evaluation_timeout_is_infrastructure():
    config = EpisodeConfig(trajectories=1, turns=1, backend="cpp", evaluation_timeout_s=0.05)
    (trajectory,) = run_episodes([TASK_A], script(answer("WRONG")), SilentEvaluator(), config)
    result = trajectory.turns[0].result
    assert (result.stage, result.blame) == ("timeout", "infrastructure")
    assert trajectory.turns[0].score is None


def test_context_budget_drops_oldest_turns():
    filler = "\n" + "#" * 3000
    policy = script(*(answer("WRONG", filler=filler) for _ in range(3)))
    attempt = Attempt(
        f"class ModelNew:\n    pass  # WRONG{filler}", "summary of WRONG", "wrong output: max abs error 3.0"
    )
    budget = len(render_prompt(TASK_A, [attempt, attempt], backend="cpp", keep=1)) + 10
    config = EpisodeConfig(trajectories=1, turns=3, backend="cpp", max_prompt_tokens=budget)
    (trajectory,) = run([TASK_A], policy, config, count_tokens=len)[0]
    prompts = [turn.prompt for turn in trajectory.turns]
    assert [p.attempts_dropped for p in prompts] == [0, 0, 1]
    assert [p.attempts_shown for p in prompts] == [0, 1, 1]
    assert all(p.tokens <= budget and not p.over_budget for p in prompts)
    assert "### Attempt 2" in prompts[2].text and "### Attempt 1" not in prompts[2].text
    assert "class Model:\n    pass  # task A" in prompts[2].text


def test_truncated_completion_is_a_recorded_format_error():
    cut = Generation("<think>I was thinking about tiling the", finish_reason="length", completion_tokens=8)
    trajectories = run([TASK_A], ScriptedPolicy(lambda prompt: cut), smoke())[0]
    assert [len(t.turns) for t in trajectories] == [2, 2]
    turn = trajectories[0].turns[0]
    assert turn.generation.truncated and turn.result.stage == "format" and turn.score == 0.0
    assert episode_rows(trajectories)[0]["finish_reason"] == "length"


def test_evaluations_overlap():
    # two evaluations that each wait for the other: they only finish if both run at once
    barrier = threading.Barrier(2, timeout=5)

    def evaluate(task, source):
        barrier.wait()
        return fake_evaluate(task, source)

    with ThreadPoolEvaluator(evaluate, max_workers=2) as evaluator:
        policy = script(answer("SPEEDUP=1.0"), answer("SPEEDUP=1.0"))
        trajectories = run_episodes([TASK_A], policy, evaluator, EpisodeConfig(trajectories=2, turns=1))
    assert all(t.turns[0].result.passed for t in trajectories)


def test_bad_inputs_raise_with_the_fix():
    with pytest.raises(ValueError, match="trajectories must be at least 1"):
        EpisodeConfig(trajectories=0)
    with pytest.raises(ValueError, match="aggregation must be one of"):
        EpisodeConfig(aggregation="mean")
    with pytest.raises(ValueError, match="baseline must be one of"):
        EpisodeConfig(baseline="median")
    with pytest.raises(ValueError, match="gamma"):
        EpisodeConfig(gamma=2.0)
    with pytest.raises(ValueError, match="pass count_tokens"):
        run([TASK_A], script(), EpisodeConfig(max_prompt_tokens=100))
    with pytest.raises(ValueError, match="has no prompt templates"):
        run([TASK_A], script(), EpisodeConfig(backend="metal"))
    with pytest.raises(ValueError, match="appears twice"):
        run([TASK_A, TASK_A], script(), EpisodeConfig())
    with pytest.raises(RuntimeError, match="returned 0 completions for 1 prompts"):
        run_episodes([TASK_A], _EmptyPolicy(), SilentEvaluator(), EpisodeConfig(trajectories=1))


class _EmptyPolicy:
    def generate(self, prompts, sampling):
        return []


# ---------------------------------------------------------------------------------------------
# Streaming: candidates reach the evaluator as their completions are written


class DelayedPolicy:
    """A streaming policy writing one completion every `delay_s`, last prompt first; prompt i gets
    `answer(f"SPEEDUP={i + 1}")`. Records when it handed out each completion and whether it finished."""

    def __init__(self, delay_s: float = 0.1, fail_after: int | None = None) -> None:
        self.delay_s = delay_s
        self.fail_after = fail_after
        self.written_at: list[float] = []
        self.finished = threading.Event()

    def generate_stream(self, prompts, sampling):
        for index in reversed(range(len(prompts))):
            if self.fail_after is not None and len(self.written_at) == self.fail_after:
                raise RuntimeError("the sampling server went away")
            time.sleep(self.delay_s)
            self.written_at.append(time.monotonic())
            yield index, answer(f"SPEEDUP={index + 1}")
        self.finished.set()

    def generate(self, prompts, sampling):
        outputs = [None] * len(prompts)
        for index, output in self.generate_stream(prompts, sampling):
            outputs[index] = output
        return outputs


class RecordingEvaluator(ThreadPoolEvaluator):
    """`fake_evaluate` on threads; records when each candidate was submitted."""

    def __init__(self) -> None:
        super().__init__(fake_evaluate, max_workers=2)
        self.submitted_at: list[float] = []

    def submit(self, task, candidate_source):
        self.submitted_at.append(time.monotonic())
        return super().submit(task, candidate_source)


STREAMED = EpisodeConfig(trajectories=2, turns=1, backend="cpp")


def test_the_first_candidate_is_submitted_before_the_last_completion_is_written():
    policy = DelayedPolicy(delay_s=0.1)
    with RecordingEvaluator() as evaluator:
        trajectories = run_episodes([TASK_A, TASK_B], policy, evaluator, STREAMED)
    assert len(evaluator.submitted_at) == 4
    assert evaluator.submitted_at[0] < policy.written_at[-1]
    # completions came last prompt first; each trajectory still has its own (prompt i: SPEEDUP=i+1)
    assert [t.turns[0].result.speedup for t in trajectories] == [1.0, 2.0, 3.0, 4.0]
    assert [(t.task.id, t.index) for t in trajectories] == [
        ("bundled/a", 0), ("bundled/a", 1), ("bundled/b", 0), ("bundled/b", 1)
    ]  # fmt: skip


def test_the_whole_turn_is_waited_for_when_streaming_is_off():
    policy = DelayedPolicy(delay_s=0.05)
    config = EpisodeConfig(trajectories=2, turns=1, backend="cpp", evaluate_while_generating=False)
    with RecordingEvaluator() as evaluator:
        trajectories = run_episodes([TASK_A, TASK_B], policy, evaluator, config)
    assert min(evaluator.submitted_at) > policy.written_at[-1]
    assert [t.turns[0].result.speedup for t in trajectories] == [1.0, 2.0, 3.0, 4.0]


def test_a_policy_without_generate_stream_gives_the_same_episodes():
    streamed = DelayedPolicy(delay_s=0)
    plain = ScriptedPolicy(lambda prompt: "unused")
    plain.generate = streamed.generate  # the same answers, all at once
    assert not hasattr(plain, "generate_stream")
    with RecordingEvaluator() as evaluator:
        from_stream = run_episodes([TASK_A, TASK_B], DelayedPolicy(delay_s=0), evaluator, STREAMED)
        from_list = run_episodes([TASK_A, TASK_B], plain, evaluator, STREAMED)
    assert episode_rows(from_stream) == episode_rows(from_list)
    assert list(stream_completions(script("a", answer("X")), ["p", "q"], Sampling())) == [
        (0, Generation("a")),
        (1, Generation(answer("X"))),
    ]


def test_a_submit_that_blocks_does_not_hold_back_the_policy():
    # the evaluator's queue stays full until the policy has written everything (backpressure)
    policy = DelayedPolicy(delay_s=0.01)

    class FullQueueEvaluator(RecordingEvaluator):
        def __init__(self) -> None:
            super().__init__()
            self.waited: list[bool] = []

        def submit(self, task, candidate_source):
            self.waited.append(policy.finished.wait(timeout=5))
            return super().submit(task, candidate_source)

    with FullQueueEvaluator() as evaluator:
        trajectories = run_episodes([TASK_A, TASK_B], policy, evaluator, STREAMED)
    assert evaluator.waited == [True] * 4
    assert all(t.turns[0].result.passed for t in trajectories)


def test_streamed_candidates_keep_the_infrastructure_and_timeout_rules():
    class BuggyPolicy(DelayedPolicy):
        def generate_stream(self, prompts, sampling):
            for index, _ in super().generate_stream(prompts, sampling):
                yield index, answer("EVALUATOR-BUG" if index == 0 else "WRONG")

    with RecordingEvaluator() as evaluator:
        trajectories = run_episodes([TASK_A], BuggyPolicy(delay_s=0), evaluator, STREAMED)
    (buggy, wrong) = (t.turns[0] for t in trajectories)
    assert (buggy.result.blame, buggy.score) == ("infrastructure", None)
    assert (wrong.result.blame, wrong.score) == ("candidate", 0.0)
    config = EpisodeConfig(trajectories=2, turns=1, backend="cpp", evaluation_timeout_s=0.05)
    trajectories = run_episodes([TASK_A], DelayedPolicy(delay_s=0), SilentEvaluator(), config)
    assert [(t.turns[0].result.stage, t.turns[0].score) for t in trajectories] == [("timeout", None)] * 2


def test_a_policy_that_fails_or_miscounts_half_way_raises():
    with RecordingEvaluator() as evaluator, pytest.raises(RuntimeError, match="server went away"):
        run_episodes([TASK_A, TASK_B], DelayedPolicy(delay_s=0, fail_after=2), evaluator, STREAMED)

    def streaming(*pairs):
        policy = ScriptedPolicy(lambda prompt: "unused")
        policy.generate_stream = lambda prompts, sampling: iter(pairs)
        return policy

    cases = [
        (streaming((0, "a"), (0, "b")), "a second completion for prompt 0"),
        (streaming((0, "a"), (2, "b")), "a completion for prompt 2 of 2"),
        (streaming((1, "a")), "returned 1 completions for 2 prompts"),
    ]
    for policy, message in cases:
        with pytest.raises(RuntimeError, match=message):
            list(stream_completions(policy, ["p", "q"], Sampling()))


def test_continue_episodes_goes_on_from_turns_held_elsewhere():
    from kevin.rl.env import Trajectory, continue_episodes

    config = EpisodeConfig(trajectories=1, turns=3, backend="cpp")
    (parent,), _ = run([TASK_A], script(answer("WRONG"), answer("SPEEDUP=1.5")), replace(config, turns=2))
    children = [Trajectory(TASK_A, index, list(parent.turns)) for index in (0, 1)]
    policy = script(answer("SPEEDUP=2.0"), answer("NOCOMPILE"))
    with CountingEvaluator() as evaluator:
        continue_episodes(children, policy, evaluator, config, turns=1)
    assert [[turn.turn for turn in child.turns] for child in children] == [[1, 2, 3], [1, 2, 3]]
    (prompts,) = policy.batches
    assert all("pass  # WRONG" in p and "pass  # SPEEDUP=1.5" in p and EXAMPLE_MARK not in p for p in prompts)
    assert [child.turns[-1].result.stage for child in children] == ["ok", "compile"]
    assert len(parent.turns) == 2  # the children's lists are their own
    with pytest.raises(ValueError, match="different numbers of turns"):
        continue_episodes([parent, Trajectory(TASK_A, 1)], policy, evaluator, config, turns=1)


def test_without_the_one_shot_example_turn_one_is_the_same_prompt_less_the_example():
    policy = script(answer("SPEEDUP=1.0"), answer("SPEEDUP=1.0"), answer("SPEEDUP=1.0"), answer("SPEEDUP=1.0"))
    with_example, _ = run([TASK_A], policy, EpisodeConfig(trajectories=1, turns=2, backend="cpp"))
    policy = script(answer("SPEEDUP=1.0"), answer("SPEEDUP=1.0"))
    without, _ = run([TASK_A], policy, EpisodeConfig(trajectories=1, turns=2, backend="cpp", one_shot=False))
    full, short = with_example[0].turns[0].prompt.text, without[0].turns[0].prompt.text
    assert EXAMPLE_MARK in full and EXAMPLE_MARK not in short
    example_start = full.index(EXAMPLE_MARK)
    example_end = full.index("You are given the following architecture")
    assert short == full[:example_start] + full[example_end:]  # nothing else changes
    assert without[0].turns[1].prompt.text == with_example[0].turns[1].prompt.text  # later turns never had it
