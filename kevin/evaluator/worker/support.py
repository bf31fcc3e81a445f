"""Helpers every stage of the worker uses: the early-verdict exception, module loading, outputs."""

from __future__ import annotations

import gc
import linecache
import os
import sys
import traceback
import types
from typing import Any


class Failure(Exception):
    """A verdict reached before the end: carries the result fields."""

    def __init__(self, stage: str, error: str, blame: str = "candidate", **fields: Any) -> None:
        super().__init__(error)
        self.fields = {"stage": stage, "error": error, "blame": blame, **fields}


DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def cpu_threads(requested: int | None, torch_default: int, cores: int | None = None) -> int:
    """torch's CPU thread count for the judge and every runner of a job: `requested`, else torch's
    default less one core, which the judge keeps for itself. The judge's clock is the CPU back end's:
    a runner whose threads take every core makes the judge (and its own main thread) wait for a
    time slice between calls, which times a 0.05 ms op on 2 cores at ~4 ms with the spread of the
    scheduler, not of the op. Same rule for candidate and baseline, so a speedup compares like
    with like."""
    if requested:
        return int(requested)
    if cores is None:
        cores = len(os.sched_getaffinity(0))
    return max(1, min(int(torch_default), cores - 1))


def load_module(source: str, name: str, filename: str) -> types.ModuleType:
    """Execute `source` as a fresh module named `name` (registered in sys.modules while it runs,
    as dataclasses and pickling expect). Its lines go in `linecache` under `filename`, so that
    `inspect.getsource` reads its functions as it would a file's: `@triton.jit` needs it (without,
    "@jit functions should be defined in a Python file" and every Triton candidate failed at load on
    the H200, s15), and tracebacks show the candidate's lines."""
    module = types.ModuleType(name)
    module.__file__ = filename
    # mtime None: linecache.checkcache keeps the entry though no such file exists
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    sys.modules[name] = module
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)
    return module


def forget_module(name: str) -> None:
    sys.modules.pop(name, None)
    gc.collect()


def flatten_outputs(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        items: list[Any] = []
        for item in out:
            items.extend(flatten_outputs(item))
        return items
    return [out]


def short_exception(exc: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if len(text) > limit:
        text = text[: limit // 4] + "\n[... traceback truncated by kevin ...]\n" + text[-(3 * limit) // 4 :]
    return text


def cast_floating(model: Any, dtype: Any) -> Any:
    import torch

    if dtype == torch.float32:
        return model
    return model.to(dtype)


def timeline(started: float, stages: list[list[Any]], sections: list[list[Any]]) -> dict[str, Any]:
    """A judge's verdict's `checks.timeline`: when its process started (`t0`, `time.time()`), and in
    seconds after that its stages' starts ([name, at]), its holds on the device ([kind, asked, held,
    released], kevin.evaluator.devlock.SECTIONS: a spare's boot included) and its `end`.
    bench/step_timeline.py lines up a step's verdicts by them: what held the device, who waited."""
    import time

    def after(at: float | None) -> float | None:
        return None if at is None else round(at - started, 3)

    return {
        "t0": round(started, 3),
        "stages": [[name, after(at)] for name, at in stages],
        "device": [[kind, *(after(at) for at in times)] for kind, *times in sections],
        "end": after(time.time()),
    }
