"""Kernel sources for the warm-start corpus: every way kevin knows to write one family task.

`variants(spec, backend)` returns `Variant`s (kevin.train.kernels.common): a complete candidate file
(a minimal `load_inline` module defining `ModelNew`, the shape of the prompts' one-shot example), the
one-line plan a model would write before it, the summary it would write after, and a label:

    honest  correct and reasonably fast
    slow    correct, but leaves most of the speed on the table
    wrong   a bug on purpose; the plan and summary do not mention it (the model must not learn
            that bugs announce themselves); the evaluator, not this label, says what it does

Modules: `common` (the Variant record, the Python frame, the elementwise function, the plan's words),
`cuda` (the GPU writers: what varies is in its docstring), `cpp` (the CPU back end's, for CPU tests
of the whole path). The kernels assume what the family guarantees: contiguous float32 inputs, sizes a
multiple of 4 (float4 kernels check it), at least 2048 columns on the GPU. Nothing here compiles or
runs code; tests/train compiles the CUDA sources with nvcc and the C++ ones through the cpp back end.
"""

from __future__ import annotations

from kevin.train.family import TaskSpec
from kevin.train.kernels import cpp, cuda
from kevin.train.kernels.common import LABELS, Variant

__all__ = ["LABELS", "Variant", "variants"]

WRITERS = {
    ("cuda", "act"): cuda.elementwise,
    ("cuda", "residual"): cuda.elementwise,
    ("cuda", "rowreduce"): cuda.rowreduce,
    ("cuda", "softmax"): cuda.softmax,
    ("cpp", "act"): cpp.elementwise,
    ("cpp", "residual"): cpp.elementwise,
    ("cpp", "rowreduce"): cpp.rowreduce,
    ("cpp", "softmax"): cpp.softmax,
}


def variants(spec: TaskSpec, backend: str) -> list[Variant]:
    """Every way kevin writes `spec` for `backend` (`cuda` or `cpp`), honest ones first."""
    writer = WRITERS.get((backend, spec.kind))
    if writer is None:
        raise ValueError(f"no kernels for back end {backend!r} and kind {spec.kind!r}")
    return writer(spec)
