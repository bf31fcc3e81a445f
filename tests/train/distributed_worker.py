"""One rank of the 2-process CPU (gloo) test; run by torchrun from test_train_distributed.py.

    torchrun --standalone --nproc-per-node 2 distributed_worker.py TOKENIZER_DIR OUT_DIR

Trains a tiny FSDP2-sharded model one step on fixed samples, writes rank 0's gathered weights and
metrics, saves and reloads a checkpoint, and samples through CollectivePolicy/follow.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from kevin.train.config import LossConfig, ModelConfig, OptimConfig
from kevin.train.learner import Learner
from kevin.train.packing import Sample

MODEL = ModelConfig(
    tiny_layers=2, tiny_hidden_size=32, tiny_heads=4, tiny_kv_heads=2, tiny_intermediate_size=64
)
OPTIM = OptimConfig(
    lr=1.0, adam_eps=1.0, grad_clip=1e9, gradient_steps=2, minibatch_mode="split", micro_batch_tokens=40
)


def fixed_samples() -> list[Sample]:
    generator = torch.Generator().manual_seed(0)
    made = []
    for index, advantage in enumerate([1.0, -1.0, 0.5, -0.5, 0.25, 0.0, -0.25, 0.75, 1.5]):
        prompt = torch.randint(3, 400, (3 + index,), generator=generator).tolist()
        completion = torch.randint(3, 400, (2 + (index * 5) % 7,), generator=generator).tolist()
        made.append(Sample(tuple(prompt), tuple(completion), advantage, index=index))
    return made


def model_and_learner(tokenizer, context=None):
    from kevin.train.model import build_model

    model = build_model(MODEL, tokenizer, seed=0)
    if context is not None and context.active:
        from kevin.train.distributed import shard_model

        shard_model(model, context, torch.float32)
    learner = Learner(
        model,
        loss=LossConfig(),
        optim=OPTIM,
        total_optimizer_steps=10,
        device=torch.device("cpu"),
        pad_id=tokenizer.pad_token_id,
        context=context,
    )
    return model, learner


def learn(learner: Learner) -> dict:
    metrics = learner.learn(fixed_samples(), step=1, max_completion_tokens=8, temperature=1.0)
    metrics.pop("per_step")
    return metrics


def main(tokenizer_dir: str, out_dir: str) -> None:
    from transformers import AutoTokenizer

    from kevin.rl.env import Sampling
    from kevin.train import checkpoint
    from kevin.train.distributed import CollectivePolicy, follow, full_state_dict, init_distributed, shutdown
    from kevin.train.model import TextCodec
    from kevin.train.policy_hf import HFPolicy

    out = Path(out_dir)
    context = init_distributed(fsdp=True)
    assert context.world_size == 2, context
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    model, learner = model_and_learner(tokenizer, context)
    metrics = learn(learner)
    state = full_state_dict(model, context)
    if context.is_main:
        torch.save(state, out / "fsdp_weights.pt")
    # checkpoint round trip under FSDP: save, perturb, load, compare
    checkpoint.save_checkpoint(
        out / "run", 1, model=model, optimizer=learner.optimizer, state={"x": 1}, context=context
    )
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    loaded = checkpoint.load_checkpoint(
        out / "run" / "checkpoints" / "step_000001", model=model, optimizer=learner.optimizer, context=context
    )
    reloaded = full_state_dict(model, context)
    restored = loaded["x"] == 1 and all(torch.equal(state[k], reloaded[k]) for k in state)
    # sampling with every rank on the sharded model
    hf = HFPolicy(model, TextCodec(tokenizer), device=torch.device("cpu"), batch_size=2, synced_gpus=True)
    policy = CountingPolicy(hf)
    torch.manual_seed(1 + context.rank)
    prompts = ["import torch", "class ModelNew", "def forward(self, x):", "x = 1", "y"]
    sampling = Sampling(max_tokens=4)
    if context.is_main:
        collective = CollectivePolicy(policy, context)
        # streamed: 5 prompts on 2 ranks are 3 each (one padding), in batches of 2: the first batch's
        # 4 completions arrive after one generate call per rank, the fifth after the second
        streamed = [(index, policy.calls) for index, _ in collective.generate_stream(prompts, sampling)]
        abandoned = collective.generate_stream(prompts, sampling)
        next(abandoned)
        abandoned.close()  # rank 0 still runs its second batch: rank 1 is in that collective too
        outputs = collective.generate(prompts, sampling)  # so this one starts in step
        context.broadcast(("done",))
        report = {
            "metrics": metrics,
            "restored": restored,
            "generated": [len(o.token_ids) for o in outputs],
            "prompts_match": [
                list(o.prompt_token_ids) == TextCodec(tokenizer).encode_prompt(p)
                for p, o in zip(prompts, outputs)
            ],
            "streamed": streamed,
            "calls": policy.calls,
        }
        (out / "report.json").write_text(json.dumps(report))
    else:
        follow(policy, context)
        (out / "rank1.json").write_text(json.dumps({"calls": policy.calls}))
    shutdown(context)


class CountingPolicy:
    """The hf policy, counting its generate calls (each one batch)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.batch_size = inner.batch_size
        self.calls = 0

    def generate(self, prompts, sampling):
        self.calls += 1
        return self.inner.generate(prompts, sampling)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    # gloo's background threads can abort the interpreter's own teardown on a loaded machine
    # ("terminate called without an active exception") after a clean shutdown: skip that teardown
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
