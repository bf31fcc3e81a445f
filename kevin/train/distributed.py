"""One process per GPU: the process group, FSDP2 sharding, the few collectives the loop needs.

Launch with `torchrun --nproc-per-node 8 -m kevin train ...`; a plain launch is one process and every
collective here is then the identity, so single-process code pays nothing.

Who does what (rank 0 leads):

- Rank 0 runs the episodes: it builds prompts, talks to the evaluator, computes credit and writes
  the run directory. The samples of the step are then broadcast, and every rank trains on its share
  (kevin.train.learner), so all ranks hold the same weights after every step.
- Sampling with transformers on a sharded model needs every rank: `CollectivePolicy` wraps rank 0's
  policy; each `generate_stream` broadcasts the prompts, every rank takes a slice (the same number
  of prompts, padded), and all ranks generate it one batch at a time (the policy's `batch_size`: the
  same number of `generate` calls on every rank; `synced_gpus` keeps their forward passes in step),
  gathering each batch's completions as it ends. Rank 0 yields them then, so their candidates are
  evaluated while the next batch is sampled, as with one process. A stream that rank 0 stops
  reading early still runs its remaining batches (discarded): the other ranks are in the same
  collectives. The other ranks sit in `follow()` until rank 0 broadcasts `("done",)`. With an HTTP
  sampler only rank 0 samples and the others wait in `follow()` the same way.

Sharding: `fully_shard` (FSDP2) on each decoder layer, then on the root; with a bf16/fp16 compute
dtype on CUDA, parameters are gathered in that dtype and gradients reduced in fp32
(MixedPrecisionPolicy), over fp32 master weights. Collectives use gloo on the CPU and NCCL on GPUs.

Not done here: tensor or pipeline parallelism, DeepSpeed, and overlapping rollouts with learning.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from kevin.rl.env import Sampling, in_prompt_order


@dataclass
class DistributedContext:
    """Where this process stands; collectives degrade to the identity for one process."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    fsdp: bool = False
    """True when the model is sharded with FSDP2 (gradients are averaged by FSDP)."""
    device: str = "cpu"
    """Device of the tensors the collectives use: cpu for gloo, cuda for NCCL."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def _reduce(self, values: Sequence[float], op: Any) -> list[float]:
        if not self.active:
            return [float(v) for v in values]
        tensor = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=op)
        return tensor.cpu().tolist()

    def sum(self, value: float) -> float:
        return self._reduce([value], dist.ReduceOp.SUM if self.active else None)[0]

    def sum_many(self, values: Sequence[float]) -> list[float]:
        return self._reduce(values, dist.ReduceOp.SUM if self.active else None)

    def max(self, value: float) -> float:
        return self._reduce([value], dist.ReduceOp.MAX if self.active else None)[0]

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank (pickled)."""
        if not self.active:
            return obj
        holder = [obj if self.is_main else None]
        dist.broadcast_object_list(holder, src=0)
        return holder[0]

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        if not self.active:
            return [obj]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def sum_gradients(self, parameters: Sequence[torch.nn.Parameter]) -> None:
        """All-reduce (sum) the gradients of unsharded parameters."""
        if not self.active:
            return
        for parameter in parameters:
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
            dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)

    def barrier(self) -> None:
        if self.active:
            dist.barrier()


def init_distributed(*, fsdp: bool = True, timeout_s: float = 7200.0) -> DistributedContext:
    """The context from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK); the process group is
    started when WORLD_SIZE > 1."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistributedContext()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(
            backend="nccl" if cuda else "gloo",
            timeout=datetime.timedelta(seconds=timeout_s),
            rank=rank,
            world_size=world_size,
        )
    return DistributedContext(rank, world_size, local_rank, fsdp=fsdp, device="cuda" if cuda else "cpu")


def shutdown(context: DistributedContext) -> None:
    """Leave the process group cleanly (a barrier first: gloo aborts on a racing teardown)."""
    if context.active and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _layer_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers: modules whose class transformers lists as not to be split."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if layers:
        return layers
    return [m for lst in model.modules() if isinstance(lst, torch.nn.ModuleList) for m in lst]


def shard_model(
    model: torch.nn.Module, context: DistributedContext, compute_dtype: torch.dtype
) -> torch.nn.Module:
    """FSDP2 on every decoder layer and on the root (in place); returns the model."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    options: dict[str, Any] = {}
    if context.device == "cuda" and compute_dtype != torch.float32:
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    for layer in _layer_modules(model):
        fully_shard(layer, **options)
    fully_shard(model, **options)
    context.fsdp = True
    return model


def full_state_dict(model: torch.nn.Module, context: DistributedContext) -> dict[str, torch.Tensor]:
    """The model's whole state dict on the CPU (a collective under FSDP: call it on every rank)."""
    if not context.fsdp:
        return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


class CollectivePolicy:
    """Rank 0's view of a policy that every rank samples with (see the module docstring)."""

    def __init__(self, policy: Any, context: DistributedContext) -> None:
        self.policy = policy
        self.context = context

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Any]:
        return in_prompt_order(self.generate_stream(prompts, sampling), len(prompts))

    def generate_stream(self, prompts: list[str], sampling: Sampling) -> Iterator[tuple[int, Any]]:
        """(prompt index, completion), each batch's as every rank has finished that batch."""
        self.context.broadcast(("generate", prompts, sampling))
        return stream_shared(self.policy, prompts, sampling, self.context)


def follow(policy: Any, context: DistributedContext) -> None:
    """Ranks > 0: sample alongside rank 0 until it releases them."""
    while True:
        message = context.broadcast(None)
        if message[0] == "done":
            return
        _, prompts, sampling = message
        for _ in stream_shared(policy, prompts, sampling, context):
            pass


def stream_shared(
    policy: Any, prompts: list[str], sampling: Sampling, context: DistributedContext
) -> Iterator[tuple[int, Any]]:
    """Every rank generates prompts[rank::world] (padded to the same count) in batches of the
    policy's `batch_size`; after each batch all ranks gather it and this yields its completions as
    (index into `prompts`, completion). Closed early, it still runs the remaining batches."""
    if not context.active:
        own = getattr(policy, "generate_stream", None)
        yield from own(prompts, sampling) if own else enumerate(policy.generate(prompts, sampling))
        return
    share = -(-len(prompts) // context.world_size)
    mine = prompts[context.rank :: context.world_size]
    padded = mine + [prompts[0] if prompts else ""] * (share - len(mine))
    batch = max(1, int(getattr(policy, "batch_size", share) or share))
    starts = iter(range(0, share, batch))
    try:
        for start in starts:
            outputs = policy.generate(padded[start : start + batch], sampling)
            for rank, part in enumerate(context.gather(outputs)):
                for k, output in enumerate(part):
                    index = rank + (start + k) * context.world_size
                    if index < len(prompts):  # beyond: a rank's padding
                        yield index, output
    except GeneratorExit:  # abandoned half way: keep step with the other ranks' collectives
        for start in starts:
            context.gather(policy.generate(padded[start : start + batch], sampling))
        raise
