"""Why the learning run's held-out kernels fail: each one sorted by its elementwise function `f`.

The family's kernels (kevin.train.kernels) all compute a task's elementwise ops in one
`__device__ __forceinline__ float f(float v)`, a line `v = <op>;` per op (since s43 after a note
`// <op>` naming it, skipped here). So a held-out kernel can be read against its task's spec
(family.json):

    passed      the verdict passed
    f right     `f` is the task's, line for line, yet the kernel failed (a wrong or broken
                launch, reduction or softmax: the variant's choice, not the task's reading)
    constant    the task's ops in its order, but a constant that is not the prompt's
    ops         other ops, or the task's in another order
    no f        no `f` the ops can be read from (garbled text, no code)

Run on the GPU run's outputs (a learning run's --out or work folder):

    python3 bench/heldout_errors.py bench/results/h200/s14/learning
    python3 bench/heldout_errors.py DIR --json errors.json

It prints one row per held-out evaluation step (counts of each class out of the samples).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin.errors import UsageError  # noqa: E402
from kevin.evaluator.result import EvalResult  # noqa: E402
from kevin.rl.episodes import open_text, read_episodes, stored  # noqa: E402
from kevin.train.family import SPEC_FILE, TaskSpec  # noqa: E402
from kevin.train.kernels.common import NOTE, elementwise_fn, op_line_patterns  # noqa: E402

CLASSES = ("passed", "f right", "constant", "ops", "no f")
_F_BODY = re.compile(r"__device__ __forceinline__ float f\(float v\) \{\n(.*?)\n    return v;\n\}", re.S)
PATTERNS = op_line_patterns()


def read_ops(candidate: str | None) -> list[tuple[str, str | None]] | None:
    """The (op name, C constant or None) lines of the candidate's `f`; None when there is no `f`
    or a line is no op of the family."""
    match = _F_BODY.search(candidate or "")
    if match is None:
        return None
    ops = []
    for line in _without_notes(match.group(1)).split("\n"):
        for name, pattern in PATTERNS:
            found = pattern.match(line)
            if found:
                ops.append((name, found.group(1) if found.groups() else None))
                break
        else:
            return None
    return ops


def _without_notes(code: str) -> str:
    """`code` less the lines of `f` that only name an op (kernels written since s43 have them; a
    run's kernels are read alike either way)."""
    return "\n".join(line for line in code.split("\n") if not line.lstrip().startswith(NOTE))


def classify(spec: TaskSpec, candidate: str | None, passed: bool) -> str:
    if passed:
        return "passed"
    if candidate and _without_notes(elementwise_fn(spec, True)) in _without_notes(candidate):
        return "f right"
    ops = read_ops(candidate)
    if ops is None:
        return "no f"
    if [name for name, _ in ops] != [name for name, _ in spec.ops]:
        return "ops"
    return "constant"


def table(rows: list[dict], specs: dict[str, TaskSpec]) -> dict[int, Counter]:
    by_step: dict[int, Counter] = {}
    for row in rows:
        spec = specs.get(row["task"])
        if spec is None:
            raise UsageError(f"held-out task {row['task']} is not in {SPEC_FILE}; pass the run's own folder")
        passed = EvalResult.from_dict(row["verdict"]).passed if row.get("verdict") else False
        by_step.setdefault(row["step"], Counter())[classify(spec, row.get("candidate"), passed)] += 1
    return dict(sorted(by_step.items()))


def _find(folder: Path, name: str) -> Path:
    for where in (folder, folder / "rl", folder / "report", folder / "family"):
        candidate = stored(where / name)
        if candidate.is_file():
            return candidate
    raise UsageError(f"no {name} in {folder} (or its rl/, report/, family/); pass a learning run's --out or work folder")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="a learning run's --out or work folder")
    parser.add_argument("--json", metavar="FILE", help="also write the counts as JSON")
    args = parser.parse_args(argv)
    try:
        folder = Path(args.folder)
        with open_text(_find(folder, SPEC_FILE)) as handle:
            family = json.load(handle)
        specs = {spec.task_id: spec for spec in (TaskSpec.from_dict(t) for t in family["tasks"])}
        rows = read_episodes(_find(folder, "heldout.jsonl"))
        counts = table(rows, specs)
    except UsageError as exc:
        print(f"heldout_errors: {exc}", file=sys.stderr)
        return 2
    print("step  samples  " + "  ".join(f"{c:>8}" for c in CLASSES))
    for step, counter in counts.items():
        cells = "  ".join(f"{counter[c]:>8}" for c in CLASSES)
        print(f"{step:>4}  {sum(counter.values()):>7}  {cells}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({str(s): {c: n[c] for c in CLASSES} for s, n in counts.items()}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
