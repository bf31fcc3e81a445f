"""The multi-turn episode: N parallel trajectories x T refinement turns per task, and their credit.

For a batch of tasks, every trajectory's turn t is one batch of prompts (all tasks, all trajectories)
handed to the policy. Completions are taken as the policy finishes them (`stream_completions`): each is
parsed at once and its candidate queued for the `Evaluator`, so evaluation starts while the rest of
the turn is still being written and evaluations overlap each other; a completion without a usable
candidate gets a format-error verdict here, without the evaluator. One thread of the episode's own
makes the `submit` calls, in parsing order, so an evaluator whose `submit` blocks while its queue is
full (backpressure) never holds back the policy. Turn t+1 waits for every verdict of turn t, because
each trajectory's next prompt carries its feedback (`kevin.rl.prompts`). After the last turn the
scores, returns and advantages are filled in (`kevin.rl.reward`, settings in `EpisodeConfig`).
`continue_episodes` runs more turns of trajectories that already hold some (a resumed run, a search
that hands one trajectory's history to several: kevin.search.beam); `run_episodes` is it from empty
trajectories, then the credit.

The policy: `Policy.generate(prompts, sampling)` returns every completion at once, in prompt order;
that is all a policy must have. A policy may also have `generate_stream(prompts, sampling)`
(`StreamingPolicy`), yielding `(prompt index, completion)` pairs in any order, each as soon as it is
written, every index exactly once; the episode uses it when it is there and `generate` otherwise
(and waits for the whole turn when `evaluate_while_generating` is off).
Results are placed by index, so a trajectory's turns do not depend on the order completions arrive in.

Stop rule: by default a trajectory runs all T turns even after a correct kernel (the paper keeps
refining for speed); with `stop_after_correct=True` a trajectory stops after its first passed turn,
so trajectories may have fewer turns.

An evaluator that raises, or does not answer within `evaluation_timeout_s` of the turn's last
submission, gives a verdict blamed on `infrastructure`: the turn is recorded and shown to the model as
our failure, and it is excluded from training (score None). An evaluator returning something other
than an EvalResult is a bug and raises, as do a `submit` that raises itself and a policy that raises
or gives a prompt no completion, or two.

Profile feedback (`profile_feedback`, off by default): once every verdict of a turn is in, each
passed kernel's feedback gets a bounded profile summary appended (kevin.rl.profiles: by default the
heaviest kernels of the evaluation's own confined trace, so nothing runs again); verdicts and
scores never change.

This module does not tokenize, apply chat templates, or train; it does not retry failed evaluations.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from kevin.evaluator.result import EvalResult
from kevin.rl import reward
from kevin.rl.candidate import ParsedCompletion, format_error_result, parse_completion
from kevin.rl.profiles import MIN_PROFILE_CHARS, Profiler, trace_profiler, with_profiles
from kevin.rl.prompts import (
    DEFAULT_TEMPLATES,
    Attempt,
    Prompt,
    PromptTemplates,
    build_prompt,
    describe_result,
    without_example,
)
from kevin.tasks import Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters handed to the policy with every batch."""

    temperature: float = 0.9
    top_p: float = 1.0
    max_tokens: int = 16384
    """Most tokens one completion may have; a completion cut there is `truncated`."""


@dataclass(frozen=True)
class Generation:
    """One completion. Back ends may return plain strings instead; they become Generation(text)."""

    text: str
    finish_reason: str | None = None
    """`stop` when the model ended it, `length` when it hit `max_tokens`, `error` when the sampler
    failed on it (not the model's doing: an infrastructure verdict, never scored); None when unknown."""
    completion_tokens: int | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


class Policy(Protocol):
    """Batch text generation. Prompts are plain strings (one user message each); the back end applies
    its chat template. Returns one completion per prompt, in order."""

    def generate(self, prompts: list[str], sampling: Sampling) -> list[str | Generation]: ...


class StreamingPolicy(Policy, Protocol):
    """A policy that also hands out each completion as soon as it is written: `(index into prompts,
    completion)` pairs in any order, every index exactly once. Optional (see the module docstring)."""

    def generate_stream(
        self, prompts: list[str], sampling: Sampling
    ) -> Iterator[tuple[int, str | Generation]]: ...


Completion = TypeVar("Completion")


def stream_completions(
    policy: Policy, prompts: list[str], sampling: Sampling
) -> Iterator[tuple[int, Generation]]:
    """Every prompt's completion as `(index, Generation)`, as soon as the policy has it: from
    `generate_stream` when the policy has one, else all at once from `generate`. Raises RuntimeError
    when the policy gives a prompt no completion, or two, or one for a prompt it was not given."""
    stream = getattr(policy, "generate_stream", None)
    if stream is not None:
        outputs: Iterable[tuple[int, str | Generation]] = stream(prompts, sampling)
    else:
        listed = policy.generate(prompts, sampling)
        if len(listed) != len(prompts):
            raise RuntimeError(f"the policy returned {len(listed)} completions for {len(prompts)} prompts")
        outputs = enumerate(listed)
    seen: set[int] = set()
    try:
        for index, output in outputs:
            if not isinstance(index, int) or not 0 <= index < len(prompts):
                raise RuntimeError(f"the policy returned a completion for prompt {index!r} of {len(prompts)}")
            if index in seen:
                raise RuntimeError(f"the policy returned a second completion for prompt {index}")
            seen.add(index)
            yield index, output if isinstance(output, Generation) else Generation(str(output))
    finally:
        close = getattr(outputs, "close", None)
        if close is not None:  # a stream abandoned half way stops its own work (requests, threads)
            close()
    if len(seen) != len(prompts):
        raise RuntimeError(f"the policy returned {len(seen)} completions for {len(prompts)} prompts")


def in_prompt_order(stream: Iterable[tuple[int, Completion]], count: int) -> list[Completion]:
    """A stream's `count` completions in prompt order: what `generate` returns, from `generate_stream`."""
    slots: list[Completion | None] = [None] * count
    for index, output in stream:
        slots[index] = output
    missing = [index for index, output in enumerate(slots) if output is None]
    if missing:
        raise RuntimeError(f"the stream gave no completion for prompts {missing}")
    return [output for output in slots if output is not None]


class Evaluator(Protocol):
    """Asynchronous evaluation: `submit` returns at once, the future holds the verdict."""

    def submit(self, task: Task, candidate_source: str) -> Future[EvalResult]: ...


class ThreadPoolEvaluator:
    """Turns any `evaluate(task, source) -> EvalResult` function into an `Evaluator`.

    The real evaluator sandboxes each candidate in its own process, so threads suffice to overlap them:
    `ThreadPoolEvaluator(lambda task, source: evaluate(task, source, EvalConfig(backend="cpp")))`.
    """

    def __init__(self, evaluate: Callable[[Task, str], EvalResult], max_workers: int = 4) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self._evaluate = evaluate
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kevin-eval")

    def submit(self, task: Task, candidate_source: str) -> Future[EvalResult]:
        return self._pool.submit(self._evaluate, task, candidate_source)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> ThreadPoolEvaluator:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class ScriptedPolicy:
    """A fake policy for tests and dry runs: `respond(prompt)` writes each completion. Keeps every
    batch of prompts it was given in `batches`."""

    def __init__(self, respond: Callable[[str], str | Generation]) -> None:
        self.respond = respond
        self.batches: list[list[str]] = []
        self.samplings: list[Sampling] = []

    def generate(self, prompts: list[str], sampling: Sampling) -> list[str | Generation]:
        self.batches.append(list(prompts))
        self.samplings.append(sampling)
        return [self.respond(prompt) for prompt in prompts]


@dataclass(frozen=True)
class EpisodeConfig:
    """One batch of episodes and its credit. Defaults are the paper's training setup (DESIGN.md §3)."""

    trajectories: int = 16
    """Parallel trajectories per task (N); the paper: 16."""
    turns: int = 4
    """Refinement turns per trajectory (T); the paper: 4 in training, 8 at test."""
    backend: str = "cuda"
    """Prompt back end: `cuda` (load_inline with cuda_sources) or `cpp` (CPU); any key of
    PromptTemplates.backends."""
    temperature: float = 0.9
    top_p: float = 1.0
    max_completion_tokens: int = 16384
    """Most tokens per completion; the paper: 16k, later 22k."""
    max_prompt_tokens: int | None = None
    """Prompt budget; the oldest attempts are dropped to fit it. Needs `count_tokens` at run time."""
    stop_after_correct: bool = False
    """Stop a trajectory after its first passed turn. The paper keeps refining (False)."""
    correct_bonus: float = reward.CORRECT_BONUS
    """Score of a passed kernel on top of its speedup."""
    gamma: float = 0.4
    """Discount of later turns' scores in a turn's return; the paper: 0.4 (0.8 with max)."""
    aggregation: reward.Aggregation = "sum"
    """Return of a turn: `sum` of discounted later scores (paper) or their `max`."""
    advantage_group: reward.GroupBy = "task"
    """Normalize advantages over all N x T samples of a `task` (paper) or per `turn` index of a task."""
    baseline: reward.Baseline = "mean"
    """Subtract the group `mean` (paper) or the `leave_one_out` mean of the other samples."""
    advantage_scale: reward.Scale = "std"
    """Divide by the group's standard deviation (`std`, paper) or not (`none`, Dr. GRPO)."""
    evaluation_timeout_s: float | None = None
    """How long to wait for a turn's verdicts after the last submission; then infrastructure. None:
    wait as long as the evaluator takes (it has its own per-stage limits)."""
    evaluate_while_generating: bool = True
    """Submit each candidate as soon as its completion is written, while the rest of the turn is
    still generated (a policy with `generate_stream`). Turn it off when the policy samples on a GPU
    the evaluator times kernels on: timings taken beside a running generation are slow and noisy."""
    one_shot: bool = True
    """Turn-1 prompts carry the one-shot example (the paper's); off: `prompts.without_example`."""
    profile_feedback: bool = False
    """Append a profile summary to each passed kernel's feedback (module docstring); verdicts and
    scores are unchanged."""
    profile_max_chars: int = 600
    """Most characters of that summary (~150 tokens); longer text is cut in the middle."""

    def __post_init__(self) -> None:
        checks = [
            (self.trajectories >= 1, f"trajectories must be at least 1, got {self.trajectories}"),
            (self.turns >= 1, f"turns must be at least 1, got {self.turns}"),
            (self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}"),
            (0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}"),
            (self.max_completion_tokens >= 1, "max_completion_tokens must be at least 1"),
            (
                self.max_prompt_tokens is None or self.max_prompt_tokens >= 1,
                "max_prompt_tokens must be a positive number of tokens, or None for no budget",
            ),
            (0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}"),
            (
                self.aggregation in reward.AGGREGATIONS,
                f"aggregation must be one of {reward.AGGREGATIONS}, got {self.aggregation!r}",
            ),
            (
                self.advantage_group in reward.GROUP_BYS,
                f"advantage_group must be one of {reward.GROUP_BYS}, got {self.advantage_group!r}",
            ),
            (
                self.baseline in reward.BASELINES,
                f"baseline must be one of {reward.BASELINES}, got {self.baseline!r}",
            ),
            (
                self.advantage_scale in reward.SCALES,
                f"advantage_scale must be one of {reward.SCALES}, got {self.advantage_scale!r}",
            ),
            (
                self.evaluation_timeout_s is None or self.evaluation_timeout_s > 0,
                "evaluation_timeout_s must be positive seconds, or None to wait for the evaluator",
            ),
            (
                self.profile_max_chars >= MIN_PROFILE_CHARS,
                f"profile_max_chars must be at least {MIN_PROFILE_CHARS}, got {self.profile_max_chars}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_p, self.max_completion_tokens)


def paper_eval() -> EpisodeConfig:
    """The paper's test-time setup: 16 trajectories x 8 turns."""
    return EpisodeConfig(turns=8)


def smoke() -> EpisodeConfig:
    """A few seconds on a CPU: 2 trajectories x 2 turns, cpp back end, short completions."""
    return EpisodeConfig(trajectories=2, turns=2, backend="cpp", max_completion_tokens=2048)


@dataclass
class Turn:
    """One turn of one trajectory: a training sample and a row of the episodes JSONL."""

    turn: int
    """1-based: turn 1 is the first attempt (the one with the one-shot example)."""
    prompt: Prompt
    generation: Generation
    parsed: ParsedCompletion
    result: EvalResult
    score: float | None
    """`reward.score_result`; None when the evaluation failed on our side (not trainable)."""
    discounted_return: float | None = None
    advantage: float | None = None

    @property
    def trainable(self) -> bool:
        return self.score is not None


@dataclass
class Trajectory:
    task: Task
    index: int
    """0-based index among the task's parallel trajectories."""
    turns: list[Turn] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return any(turn.result.passed for turn in self.turns)

    def attempts(self, templates: PromptTemplates = DEFAULT_TEMPLATES) -> list[Attempt]:
        """What the next prompt keeps of each earlier turn."""
        return [
            Attempt(turn.parsed.candidate, turn.parsed.summary, describe_result(turn.result, templates))
            for turn in self.turns
        ]


def _infrastructure_result(task: Task, stage: str, error: str) -> EvalResult:
    return EvalResult(stage=stage, error=error, blame="infrastructure", task_id=task.id)


def _collect(
    pending: Sequence[tuple[Task, Future[EvalResult] | EvalResult]], timeout_s: float | None
) -> list[EvalResult]:
    """Wait for a turn's verdicts; evaluator exceptions and timeouts become infrastructure verdicts."""
    futures = [item for _, item in pending if isinstance(item, Future)]
    concurrent.futures.wait(futures, timeout=timeout_s)
    results = []
    for task, item in pending:
        if isinstance(item, EvalResult):
            results.append(item)
            continue
        if not item.done():
            item.cancel()
            results.append(_infrastructure_result(task, "timeout", f"no verdict within {timeout_s} s"))
            continue
        try:
            result = item.result()
        except Exception as exc:  # the evaluator's failure, not the model's: record and go on
            log.warning("evaluator raised on task %s: %s: %s", task.id, type(exc).__name__, exc)
            result = _infrastructure_result(task, "runtime", f"evaluator raised {type(exc).__name__}: {exc}")
        if not isinstance(result, EvalResult):
            raise TypeError(f"the evaluator returned {type(result).__name__}, not an EvalResult")
        results.append(result)
    return results


def run_episodes(
    tasks: Sequence[Task],
    policy: Policy,
    evaluator: Evaluator,
    config: EpisodeConfig,
    *,
    templates: PromptTemplates = DEFAULT_TEMPLATES,
    count_tokens: Callable[[str], int] | None = None,
    profiler: Profiler | None = None,
) -> list[Trajectory]:
    """Run N x T episodes for every task; return the trajectories (task-major) with credit assigned."""
    ids = [task.id for task in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError("a task appears twice in the batch; list each task once and raise trajectories")
    trajectories = [Trajectory(task, index) for task in tasks for index in range(config.trajectories)]
    continue_episodes(
        trajectories,
        policy,
        evaluator,
        config,
        templates=templates,
        count_tokens=count_tokens,
        profiler=profiler,
    )
    assign_credit(trajectories, config)
    return trajectories


def continue_episodes(
    trajectories: Sequence[Trajectory],
    policy: Policy,
    evaluator: Evaluator,
    config: EpisodeConfig,
    *,
    turns: int | None = None,
    templates: PromptTemplates = DEFAULT_TEMPLATES,
    count_tokens: Callable[[str], int] | None = None,
    profiler: Profiler | None = None,
) -> None:
    """Run `turns` more turns (default `config.turns`) of `trajectories`, in place, as run_episodes
    runs its turns. A trajectory may already hold turns, from anywhere (a resumed run, a search that
    hands one trajectory's history to several): its next prompt shows them as earlier attempts. All
    must hold the same number of turns; the next one is numbered after them. Credit is not assigned
    (`assign_credit`). `profiler` replaces the default one when `config.profile_feedback` is on."""
    if config.backend not in templates.backends:
        raise ValueError(
            f"backend {config.backend!r} has no prompt templates; known: {sorted(templates.backends)}"
        )
    if config.max_prompt_tokens is not None and count_tokens is None:
        raise ValueError("config.max_prompt_tokens is set: pass count_tokens (the policy's tokenizer)")
    if not config.one_shot:
        templates = without_example(templates)
    done = {len(t.turns) for t in trajectories}
    if len(done) > 1:
        raise ValueError(
            f"trajectories hold different numbers of turns ({sorted(done)}); continue them apart"
        )
    first = done.pop() + 1 if done else 1
    if config.profile_feedback and profiler is None:
        profiler = trace_profiler(config.profile_max_chars)
    submitter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kevin-submit")
    try:
        for number in range(first, first + (config.turns if turns is None else turns)):
            active = [t for t in trajectories if not (config.stop_after_correct and t.passed)]
            if not active:
                break
            _run_turn(number, active, policy, evaluator, submitter, config, templates, count_tokens, profiler)
    finally:  # a policy that failed half way: its candidates not yet submitted are dropped
        submitter.shutdown(wait=True, cancel_futures=True)


def _run_turn(
    number: int,
    active: list[Trajectory],
    policy: Policy,
    evaluator: Evaluator,
    submitter: ThreadPoolExecutor,
    config: EpisodeConfig,
    templates: PromptTemplates,
    count_tokens: Callable[[str], int] | None,
    profiler: Profiler | None = None,
) -> None:
    """Turn `number` of every active trajectory: prompts, completions as they come, each candidate
    queued for `submitter` (one thread calling `evaluator.submit`) as soon as it is parsed, verdicts."""
    started = time.monotonic()
    prompts = [
        build_prompt(
            t.task,
            t.attempts(templates),
            backend=config.backend,
            templates=templates,
            count_tokens=count_tokens,
            max_prompt_tokens=config.max_prompt_tokens,
        )
        for t in active
    ]
    over = sum(prompt.over_budget for prompt in prompts)
    if over:
        log.warning(
            "turn %d: %d prompts exceed max_prompt_tokens even without earlier attempts", number, over
        )
    written: dict[int, tuple[Generation, ParsedCompletion]] = {}
    queued: dict[int, Future[Future[EvalResult]] | EvalResult] = {}
    stream = stream_completions(policy, [prompt.text for prompt in prompts], config.sampling)
    with contextlib.closing(stream):
        completions = stream if config.evaluate_while_generating else list(stream)
        for index, generation in completions:
            task = active[index].task
            parsed = parse_completion(generation.text)
            written[index] = (generation, parsed)
            if generation.finish_reason == "error":
                queued[index] = _infrastructure_result(task, "runtime", "the sampler failed on this completion")
            elif parsed.ok:
                queued[index] = submitter.submit(evaluator.submit, task, parsed.candidate)
            else:
                queued[index] = format_error_result(parsed.error, task_id=task.id)
    generated = time.monotonic()
    # The verdict timeout starts once every submit has returned, as when the episode submitted itself;
    # a submit that raised raises here.
    pending = []
    for index, trajectory in enumerate(active):
        item = queued[index]
        pending.append((trajectory.task, item.result() if isinstance(item, Future) else item))
    results = _collect(pending, config.evaluation_timeout_s)
    if config.profile_feedback and profiler is not None:
        candidates = [written[index][1].candidate for index in range(len(active))]
        tasks = [t.task for t in active]
        results = with_profiles(tasks, candidates, results, profiler, config.profile_max_chars, templates)
    for index, (trajectory, prompt, result) in enumerate(zip(active, prompts, results)):
        generation, parsed = written[index]
        score = reward.score_result(result, correct_bonus=config.correct_bonus)
        trajectory.turns.append(Turn(number, prompt, generation, parsed, result, score))
    log.info(
        "turn %d/%d: %d completions written in %.1f s, last verdict %.1f s after the last completion: "
        "%d passed, %d format errors, %d infrastructure failures",
        number,
        config.turns,
        len(active),
        generated - started,
        time.monotonic() - generated,
        sum(r.passed for r in results),
        sum(r.stage == "format" for r in results),
        sum(r.blame == "infrastructure" for r in results),
    )


def assign_credit(trajectories: Sequence[Trajectory], config: EpisodeConfig) -> None:
    """Fill every turn's return and advantage in place (`reward.credit` with the config's settings);
    may be rerun with other settings."""
    samples = [(t, turn) for t in trajectories for turn in t.turns]
    returns, advantages = reward.credit(
        [turn.score for _, turn in samples],
        [t.task.id for t, _ in samples],
        [t.index for t, _ in samples],
        [turn.turn for _, turn in samples],
        gamma=config.gamma,
        aggregation=config.aggregation,
        group_by=config.advantage_group,
        baseline=config.baseline,
        scale=config.advantage_scale,
    )
    for (_, turn), value, advantage in zip(samples, returns, advantages):
        turn.discounted_return = value
        turn.advantage = advantage
