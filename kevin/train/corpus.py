"""The warm-start corpus: (prompt, completion) pairs for the family's tasks (issue #16).

A sample's prompt is exactly what the policy reads on turn 1 of an episode: `kevin.rl.prompts.
build_prompt` for the task and back end (intro, instructions, the one-shot example, the task, the
answer format). Its completion is what the model must learn to write, in the format
`kevin.rl.candidate` parses:

    Plan: fuse gelu and relu into one kernel; float4 loads and stores, one float4 per thread, 256 threads per block.

    ```python
    <a complete load_inline candidate defining ModelNew>
    ```

    Fused gelu and relu into one kernel: float4 loads and stores, one float4 per thread, 256 threads per block.

The code comes from `kevin.train.kernels` (every variant of the task: honest, slow and wrong).
The warm start imitates the whole corpus on purpose: the supervised policy then picks a variant about
as the corpus does, and the RL phase has something to improve (fewer wrong and slow picks). The
plan line names the variant's choices before the code, so a choice is a handful of tokens.

`corpus_baseline_picks` draws the corpus-average baseline of the learning run: variants picked
uniformly per held-out task (what a policy sampling the corpus would submit), evaluated like the
policy's kernels. This module builds text; it neither tokenizes (kevin.train.sft) nor evaluates.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kevin.rl.prompts import build_prompt
from kevin.tasks import Task
from kevin.train.family import TaskSpec
from kevin.train.kernels import LABELS, Variant, variants

CORPUS_FILE = "corpus.jsonl"


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


def _paired(specs: Sequence[TaskSpec], tasks: Sequence[Task]) -> list[tuple[TaskSpec, Task]]:
    by_id = {task.id: task for task in tasks}
    return [(spec, by_id[spec.task_id]) for spec in specs if spec.task_id in by_id]


def build_corpus(
    specs: Sequence[TaskSpec], tasks: Sequence[Task], backend: str, *, labels: Iterable[str] = LABELS
) -> list[Sample]:
    """One sample per variant of every task in `tasks` (matched to `specs` by id) with a label in
    `labels`, in task order."""
    wanted = set(labels)
    unknown = wanted - set(LABELS)
    if unknown:
        raise ValueError(f"unknown labels {sorted(unknown)}; use {', '.join(LABELS)}")
    samples = []
    for spec, task in _paired(specs, tasks):
        prompt = build_prompt(task, [], backend=backend).text
        for variant in variants(spec, backend):
            if variant.label in wanted:
                samples.append(Sample(task.id, variant.name, variant.label, prompt, completion_text(variant)))
    return samples


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


def corpus_stats(samples: Sequence[Sample], count_tokens: Callable[[str], int]) -> dict:
    """Sizes for the record: samples per label, tasks, completion and prompt token lengths."""
    completion = sorted(count_tokens(s.completion) for s in samples)
    prompts = sorted(count_tokens(p) for p in {s.prompt for s in samples})

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
