"""The warm-start corpus: (prompt, completion) pairs for the family's tasks (issue #16).

A sample's prompt is exactly what the policy reads on turn 1 of an episode: `kevin.rl.prompts.
build_prompt` for the task and back end (intro, instructions, the one-shot example, the task, the
answer format). Its completion is what the model must learn to write, in the format
`kevin.rl.candidate` parses:

    Plan: fuse scale(1.5), gelu and relu into one kernel; float4 loads and stores, one float4 per thread, 256 threads per block.

    ```python
    <a complete load_inline candidate defining ModelNew>
    ```

    Fused gelu and relu into one kernel: float4 loads and stores, one float4 per thread, 256 threads per block.

The code comes from `kevin.train.kernels` (every variant of the task: honest, slow and wrong).

Constants are copied, not recalled: with `constant_draws=K`, each training task appears K times, as
written and with up to K-1 other draws of its constants (scale, bias, leaky slope; same ops, order
and shape, so no held-out signature leaks in), each with its own prompt and kernels; a task with
fewer assignments repeats them, so every task keeps the same weight. Without them a task's signature
always came with one constant, and the 26M warm start wrote the constant it had memorised for a
similar chain instead of the one in the prompt: 8-9 of its 16-22 failed held-out kernels in
sessions 13-14 differed from a right one only there (scale 0.25 for 3.0, leaky 0.2 for 0.01).

The prompt's docstring names the task's ops and constants but no task number, the plan names them
again just before `f` (kevin.train.kernels.common._op_words), and `f` names each op once more on the
line before the op's code (`// tanh`, then `v = tanhf(v);`): with a number, each training chain had a
key the warm start could look it up by, and held-out numbers were keys it never saw (s16: 12 of 32
held-out kernels wrote another chain, 9 another constant); without the notes in `f`, it planned the
right chain and wrote another (s41: 9 of 12 failed held-out kernels).

The warm start imitates the whole corpus on purpose: the supervised policy then picks a variant about
as the corpus does, and the RL phase has something to improve (fewer wrong and slow picks). The
plan line names the variant's choices before the code, so a choice is a handful of tokens.

`corpus_baseline_picks` draws the corpus-average baseline of the learning run: variants picked
uniformly per held-out task (what a policy sampling the corpus would submit), evaluated like the
policy's kernels. This module builds text; it neither tokenizes (kevin.train.sft) nor evaluates.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kevin.rl.prompts import DEFAULT_TEMPLATES, build_prompt, without_example
from kevin.tasks import BUNDLED_SIZES, Task, with_size
from kevin.train.family import OPS, TaskSpec, constant_choices
from kevin.train.kernels import LABELS, Variant, variants
from kevin.train.kernels.common import op_line_patterns

CORPUS_FILE = "corpus.jsonl"
CONSTANT_DRAWS = 3
"""Copies of each training task, with other draws of its constants, in the warm-start corpus (`kevin
sft`, the learning run): 600 tasks give ~35k samples, 0.7 of a pass of the h200 SFT schedule (1600
steps x 16; the loss still ends at 0.016, as with one copy)."""
LENGTH_CAP = 8
"""At most this many times the copies for a task of a rare chain length (`length_repeats`): the s16
family's 600 training tasks then weigh 1089 (~64k samples, 0.4 of a pass of the h200 schedule)."""


@dataclass(frozen=True)
class Sample:
    task_id: str
    variant: str
    label: str
    """`honest`, `slow` or `wrong` (kevin.train.kernels)."""
    prompt: str
    completion: str


def completion_text(variant: Variant) -> str:
    """What the model writes for `variant`: the plan, one python block, the summary."""
    return f"{variant.plan}\n\n```python\n{variant.source}```\n\n{variant.summary}"


_CONSTANT_OPS = "|".join(op.name for op in OPS.values() if op.constants)
_PLAN_CONSTANT = re.compile(rf"\b(?:{_CONSTANT_OPS})\((-?[0-9][0-9.e+-]*)\)")
_CODE_CONSTANTS = [pattern for _, pattern in op_line_patterns(slots=False) if pattern.groups]


def constant_spans(completion: str) -> list[tuple[int, int]]:
    """Character spans of the constants `completion` copies from its prompt: each op's constant as
    the plan names it (`scale(0.25)`) and as its line of `f` writes it (`v = v * 0.25f;`), in order.
    What the warm start's validation scores copying on (kevin.train.sft: a third of session 28's
    held-out kernels wrote another of the op's constants than the prompt's)."""
    plan = completion.split("\n", 1)[0]
    spans = [match.span(1) for match in _PLAN_CONSTANT.finditer(plan)]
    for pattern in _CODE_CONSTANTS:
        spans += [match.span(1) for match in pattern.finditer(completion)]
    return sorted(spans)


def _paired(specs: Sequence[TaskSpec], tasks: Sequence[Task]) -> list[tuple[TaskSpec, Task]]:
    by_id = {task.id: task for task in tasks}
    return [(spec, by_id[spec.task_id]) for spec in specs if spec.task_id in by_id]


def build_corpus(
    specs: Sequence[TaskSpec],
    tasks: Sequence[Task],
    backend: str,
    *,
    labels: Iterable[str] = LABELS,
    constant_draws: int = 1,
    length_cap: int = 1,
    seed: int = 0,
    one_shot: bool = True,
    constant_pool: str = "narrow",
) -> list[Sample]:
    """One sample per variant of every task in `tasks` (matched to `specs` by id) with a label in
    `labels`, in task order, `constant_draws` times: the task as written, then other draws of its
    constants from `constant_pool`, the family's (`constant_draws_of`, kevin.train.family.
    read_constant_pool; repeated in turn when it has fewer). With `length_cap` > 1, a
    task's copies are also multiplied by its chain length's `length_repeats`. `one_shot`: the
    prompts carry the one-shot example, as the RL run's must (`RolloutConfig.one_shot`)."""
    wanted = set(labels)
    unknown = wanted - set(LABELS)
    if unknown:
        raise ValueError(f"unknown labels {sorted(unknown)}; use {', '.join(LABELS)}")
    if constant_draws < 1:
        raise ValueError("constant_draws must be at least 1 (1: each task as written)")
    if length_cap < 1:
        raise ValueError("length_cap must be at least 1 (1: every task the same weight)")
    rng = random.Random(seed)
    templates = DEFAULT_TEMPLATES if one_shot else without_example()
    samples = []
    paired = _paired(specs, tasks)
    repeats = length_repeats([spec for spec, _ in paired], length_cap)
    for spec, task in paired:
        copies = constant_draws * repeats[spec.task_id]
        drawn = constant_draws_of(spec, task, copies, rng, constant_pool)
        # Every task weighs `copies`, whatever its constants: a task with fewer assignments repeats
        # them, so the draws change which constants are taught, not how often each chain is (s15's
        # start, whose constant-bearing chains came up to 3x as often as the rest, appended ops to
        # single-op chains 16 times in 32).
        for index in range(copies):
            drawn_spec, drawn_task = drawn[index % len(drawn)]
            prompt = build_prompt(drawn_task, [], backend=backend, templates=templates).text
            for variant in variants(drawn_spec, backend):
                if variant.label in wanted:
                    samples.append(Sample(task.id, variant.name, variant.label, prompt, completion_text(variant)))
    return samples


def length_repeats(specs: Sequence[TaskSpec], cap: int) -> dict[str, int]:
    """Copies per task (task id -> 1..cap) that give each chain length of a kind about the weight of
    its most common length: round(largest group / own group), at most `cap`.

    The family's combinations are mostly its longest chains (residual, row reduction and softmax:
    56 op pairs to 8 single ops; act: 336 triples, 56 pairs, 8 singles), while the held-out split
    takes lengths in turn. s16's warm start wrote the right plan and then a second op after a lone
    `tanh` in 5 of its 8 wrong chains: the length it had seen after `x + r`, before a reduction or a
    softmax. `cap` = 1 gives every task one copy (sessions 10-16)."""
    groups: dict[tuple[str, int], list[str]] = {}
    for spec in specs:
        groups.setdefault((spec.kind, len(spec.ops)), []).append(spec.task_id)
    largest: dict[str, int] = {}
    for (kind, _), ids in groups.items():
        largest[kind] = max(largest.get(kind, 0), len(ids))
    return {
        task_id: max(1, min(cap, round(largest[kind] / len(ids))))
        for (kind, _), ids in groups.items()
        for task_id in ids
    }


def _other_assignments(
    choices: list[tuple], own: tuple, count: int, rng: random.Random
) -> list[tuple]:
    """Up to `count` assignments of `choices` (one per op) other than `own`, without replacement. Few
    enough to list (the narrow pool: the draws of every corpus written before pools), all of them
    sampled; otherwise (the wide pool: up to 60^3 per chain) drawn one op at a time until `count`
    distinct ones are found."""
    total = math.prod(len(c) for c in choices)
    if total <= 4096:
        others = [combo for combo in itertools.product(*choices) if combo != own]
        return rng.sample(others, min(count, len(others)))
    found: list[tuple] = []
    while len(found) < min(count, total - 1):
        combo = tuple(rng.choice(c) for c in choices)
        if combo != own and combo not in found:
            found.append(combo)
    return found


def constant_draws_of(
    spec: TaskSpec, task: Task, count: int, rng: random.Random, constant_pool: str = "narrow"
) -> list[tuple[TaskSpec, Task]]:
    """(spec, task) as written, then up to `count` - 1 other assignments of its ops' constants drawn
    without replacement from the ops' choices (fewer when the ops have fewer; none for ops without a
    constant), each as a spec and a task at the size `task` was written at (same id: a corpus
    sample names the task it teaches)."""
    own = tuple(c for _, c in spec.ops)
    choices = [constant_choices(name, constant_pool) or (None,) for name, _ in spec.ops]
    size = _written_size(spec, task)
    if count == 1 or size is None:
        return [(spec, task)]
    others = _other_assignments(choices, own, count - 1, rng)
    if not others:
        return [(spec, task)]
    drawn = []
    for combo in others:
        other = dataclasses.replace(spec, ops=tuple((name, c) for (name, _), c in zip(spec.ops, combo)))
        source = with_size(other.source(), size)
        drawn.append((other, Task.from_source(
            source, id=task.id, name=task.name, level=task.level, problem=task.problem, origin=task.origin
        )))
    return [(spec, task), *drawn]


def _written_size(spec: TaskSpec, task: Task) -> str | None:
    """The size `task`'s file was written at from `spec` (None when the file is not the spec's)."""
    for size in BUNDLED_SIZES:
        if with_size(spec.source(), size) == task.source:
            return size
    return None


def corpus_baseline_picks(
    specs: Sequence[TaskSpec], tasks: Sequence[Task], backend: str, *, per_task: int, seed: int = 0
) -> list[tuple[Task, Variant]]:
    """`per_task` variants of each task, drawn uniformly without replacement (all when fewer)."""
    rng = random.Random(seed)
    picks = []
    for spec, task in _paired(specs, tasks):
        every = variants(spec, backend)
        picks += [(task, variant) for variant in rng.sample(every, min(per_task, len(every)))]
    return picks


def tokenizer_texts(samples: Sequence[Sample]) -> list[str]:
    """Texts for the tokenizer: every distinct prompt and every completion."""
    return sorted({s.prompt for s in samples}) + [s.completion for s in samples]


def corpus_stats(samples: Sequence[Sample], completion_tokens: Iterable[int], prompt_tokens: Iterable[int]) -> dict:
    """Sizes for the record: samples per label, tasks, and the token lengths of the completions and
    of the distinct prompts (kevin.train.sft.Prepared has both: nothing is encoded twice)."""
    completion = sorted(completion_tokens)
    prompts = sorted(prompt_tokens)

    def spread(values: list[int]) -> dict:
        if not values:
            return {}
        return {
            "min": values[0],
            "median": values[len(values) // 2],
            "max": values[-1],
            "mean": sum(values) / len(values),
        }

    return {
        "samples": len(samples),
        "tasks": len({s.task_id for s in samples}),
        "labels": {label: sum(s.label == label for s in samples) for label in LABELS},
        "completion_tokens": spread(completion),
        "prompt_tokens": spread(prompts),
    }


def write_corpus(samples: Sequence[Sample], path: str | Path) -> Path:
    """One JSON object per sample."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(asdict(sample)) + "\n")
    return path
