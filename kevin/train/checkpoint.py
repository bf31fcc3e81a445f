"""Checkpoints for exact resume, and weight exports for a sampling server.

A checkpoint is a folder `checkpoints/step_NNNNNN/` with

    model.pt       the model's state dict (LoRA: the trainable adapter weights only; the frozen base
                   comes from `model.name_or_path` again)
    optimizer.pt   AdamW's state
    state.pt       the step, the learner's optimiser-step count (the lr schedule's state), the task
                   sampler's state, the collapse monitor's streaks, and every rank's RNG states
                   (python `random`, numpy, torch CPU, every CUDA device)

written under a temporary name and renamed when complete, then `checkpoints/latest` is rewritten to
name it; the oldest folders beyond `keep` are deleted. Resuming from it restores all of that, so on
the CPU a run stopped after step k and resumed matches an uninterrupted run bit for bit (the tests
check it). Rows that the stopped launch logged after step k are dropped by the loop.

A slim checkpoint (`slim_checkpoint`: the model in bf16, no optimizer.pt) is what fits through a
narrow pipe, such as the device machine's file limits between sessions (bench/learning_carry.py).
Resuming from it is not exact: the weights are rounded to bf16 once and AdamW's moments start
from zero (a warning says so, `optimizer_restored` in the state returned is False, and the learner
warms its rate up again: kevin.train.learner); the step, the schedule, the sampler and the RNG are
restored.

Under FSDP the full state dicts are gathered to the CPU (collectives on every rank) and rank 0 writes;
on load every rank reads the files (a shared filesystem is assumed) and keeps its shards.
"""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from kevin.train.distributed import DistributedContext, full_state_dict
from kevin.train.model import is_lora

CHECKPOINTS_DIR = "checkpoints"
LATEST_FILE = "latest"
MODEL_FILE = "model.pt"
OPTIMIZER_FILE = "optimizer.pt"
STATE_FILE = "state.pt"

log = logging.getLogger(__name__)


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy

        state["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy

        numpy.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _model_state(model: torch.nn.Module, context: DistributedContext) -> dict[str, torch.Tensor]:
    state = full_state_dict(model, context)
    if is_lora(model):
        trainable = {name for name, p in model.named_parameters() if p.requires_grad}
        state = {k: v for k, v in state.items() if k in trainable}
    return state


def _optimizer_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, context: DistributedContext
) -> dict:
    if not context.fsdp:
        return optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(
        model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    pointer = Path(run_dir) / CHECKPOINTS_DIR / LATEST_FILE
    if not pointer.is_file():
        return None
    path = pointer.parent / pointer.read_text(encoding="utf-8").strip()
    return path if path.is_dir() else None


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    context: DistributedContext,
    keep: int = 2,
) -> Path:
    """Write the checkpoint of `step` (call on every rank); `state` holds the loop's own state."""
    model_state = _model_state(model, context)
    optimizer_state = _optimizer_state(model, optimizer, context)
    rng_states = context.gather(rng_state())
    root = Path(run_dir) / CHECKPOINTS_DIR
    final = root / f"step_{step:06d}"
    if context.is_main:
        partial = root / f".step_{step:06d}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        torch.save(model_state, partial / MODEL_FILE)
        torch.save(optimizer_state, partial / OPTIMIZER_FILE)
        torch.save({**state, "step": step, "rng": rng_states}, partial / STATE_FILE)
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
        (root / LATEST_FILE).write_text(final.name + "\n", encoding="utf-8")
        for old in sorted(p for p in root.glob("step_*") if p.is_dir())[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    context.barrier()
    return final


def load_checkpoint(
    path: Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, context: DistributedContext
) -> dict[str, Any]:
    """Restore model, optimiser and this rank's RNG from `path`; return the loop's state, with
    `optimizer_restored` (False for a slim checkpoint)."""
    model_state = torch.load(path / MODEL_FILE, map_location="cpu", weights_only=True)
    optimizer_state = None
    if (path / OPTIMIZER_FILE).is_file():
        optimizer_state = torch.load(path / OPTIMIZER_FILE, map_location="cpu", weights_only=False)
    else:
        log.warning("%s has no %s (a slim checkpoint): AdamW's moments start from zero", path, OPTIMIZER_FILE)
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    strict = not is_lora(model)
    if context.fsdp:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, strict=strict)
        set_model_state_dict(model, model_state, options=options)
        if optimizer_state is not None:
            set_optimizer_state_dict(model, optimizer, optimizer_state, options=options)
    else:
        missing, unexpected = model.load_state_dict(model_state, strict=strict)
        if unexpected:
            raise ValueError(f"checkpoint {path} has weights the model lacks: {unexpected[:5]}")
        if optimizer_state is not None:
            optimizer.load_state_dict(optimizer_state)
    rng = state.pop("rng")
    set_rng_state(rng[context.rank] if context.rank < len(rng) else rng[0])
    state["optimizer_restored"] = optimizer_state is not None
    return state


def export_weights(
    model: torch.nn.Module, tokenizer: Any, directory: Path, context: DistributedContext
) -> Path:
    """Save the weights a sampling server loads: the LoRA adapter, or the whole model with its
    tokenizer, in Hugging Face format (call on every rank)."""
    state = full_state_dict(model, context)
    if context.is_main:
        directory.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(directory), state_dict=state)
        if not is_lora(model):
            tokenizer.save_pretrained(str(directory))
    context.barrier()
    return directory


def slim_checkpoint(source: Path, target: Path, *, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Copy checkpoint `source` to `target` with its floating-point weights in `dtype` and without the
    optimiser's state: about a quarter of the bytes (fp32 weights + AdamW's two moments -> bf16
    weights). `load_checkpoint` resumes from it, not exactly (see the module's docstring)."""
    model_state = torch.load(source / MODEL_FILE, map_location="cpu", weights_only=True)
    target.mkdir(parents=True, exist_ok=True)
    torch.save(
        {k: v.to(dtype) if v.is_floating_point() else v for k, v in model_state.items()}, target / MODEL_FILE
    )
    shutil.copy(source / STATE_FILE, target / STATE_FILE)
    return target

