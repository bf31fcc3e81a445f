"""The trainer on a CUDA GPU: bf16 sampling and learning, and a step rewarded by a real CUDA kernel.
Skips without CUDA (tests/conftest.py); run on the GPU machine with `pytest -m gpu tests/train`."""

from __future__ import annotations

import pytest
import torch
from train_helpers import tiny_config, tiny_model, tiny_tokenizer

from kevin.rl.env import Sampling
from kevin.rl.episodes import read_episodes
from kevin.tasks import bundled_dir, load_bundled
from kevin.train.config import LossConfig, OptimConfig
from kevin.train.learner import Learner
from kevin.train.loop import train
from kevin.train.model import TextCodec
from kevin.train.packing import Sample
from kevin.train.policy_hf import HFPolicy

pytestmark = pytest.mark.gpu


def test_bf16_sampling_and_learning_on_cuda():
    device = torch.device("cuda")
    codec = TextCodec(tiny_tokenizer())
    model = tiny_model(seed=1, layers=2, hidden=64).to(device)
    policy = HFPolicy(model, codec, device=device, autocast_dtype=torch.bfloat16)
    torch.manual_seed(0)
    outputs = policy.generate(["import torch\n", "class ModelNew(nn.Module):"] * 4, Sampling(max_tokens=32))
    samples = [
        Sample(o.prompt_token_ids, o.token_ids, (-1.0) ** i, o.logprobs, index=i)
        for i, o in enumerate(outputs)
    ]
    learner = Learner(
        model,
        loss=LossConfig(),
        optim=OptimConfig(lr=1e-3, grad_clip=1.0),
        total_optimizer_steps=4,
        device=device,
        pad_id=codec.pad_id,
        autocast_dtype=torch.bfloat16,
    )
    result = learner.learn(samples, step=1, max_completion_tokens=32, temperature=0.9)
    print({k: v for k, v in result.items() if k != "per_step"})
    assert result["gradient_steps"] == 2 and torch.isfinite(torch.tensor(result["grad_norm"]))
    assert result["logprob_diff_max"] < 0.5  # bf16 sampler and bf16 learner agree to bf16 precision
    assert next(model.parameters()).dtype == torch.float32  # fp32 master weights


def test_left_padded_bf16_backward_is_finite_with_the_real_attention_kernels():
    # s12's H200 learning run: a finite loss and a NaN gradient in every parameter at one step in
    # seven, from left-padded rows whose pad queries attend to nothing (kevin.train.logprobs
    # attention_mask_for). Sweeps row lengths over kernel alignments; prints what the plain 2-D mask
    # gives, as the record of the cause.
    from kevin.train.logprobs import completion_logprobs
    from kevin.train.packing import collate

    device = torch.device("cuda")
    model = tiny_model(seed=2, layers=2, hidden=64).to(device)
    generator = torch.Generator().manual_seed(0)
    plain_nan = 0
    for trial in range(24):
        lengths = torch.randint(20, 400, (6,), generator=generator).tolist()
        batch = collate(
            [
                Sample(tuple(range(3, 3 + n // 2)), tuple(range(3, 3 + n - n // 2)), 1.0, index=i)
                for i, n in enumerate(lengths)
            ],
            0,
        )
        model.zero_grad(set_to_none=True)
        logprobs = completion_logprobs(
            model, batch, temperature=0.9, device=device, autocast_dtype=torch.bfloat16
        )
        (logprobs * batch.completion_mask.to(device)).sum().backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters()), (trial, lengths)
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(
                input_ids=batch.input_ids.to(device),
                attention_mask=batch.attention_mask.to(device),
                position_ids=batch.position_ids.to(device),
                use_cache=False,
            ).logits
        logits.float().log_softmax(-1)[..., 0].masked_fill(batch.attention_mask.to(device) == 0, 0).sum().backward()
        plain_nan += not all(torch.isfinite(p.grad).all() for p in model.parameters())
    print(f"plain 2-D mask: non-finite gradients in {plain_nan} of 24 batches")


def test_a_step_rewarded_by_a_real_cuda_kernel(tmp_path):
    task = next(t for t in load_bundled(size="small") if t.id == "B_01")
    honest = (bundled_dir().parent / "cuda" / "01_gelu_tanh.py").read_text()
    answers = [f"<think>One fused kernel.</think>\n```python\n{honest}```\nFused the GELU chain.", "no code"]

    class Alternating:
        count = 0

        def generate(self, prompts, sampling):
            outputs = [answers[(self.count + i) % 2] for i in range(len(prompts))]
            self.count += len(prompts)
            return outputs

    config = tiny_config(
        rollout={"tasks_per_step": 1, "trajectories": 4, "turns": 1, "backend": "cuda"},
        evaluator={"cache_dir": str(tmp_path / "cache"), "max_in_flight": 2},
        loop={"steps": 1},
    )
    result = train(
        config, tmp_path / "run", tasks=[task], policy_factory=lambda run: Alternating(), out=print
    )
    (metrics,) = result.history
    rows = read_episodes(tmp_path / "run")
    passed = [row for row in rows if row["verdict"]["stage"] == "ok"]
    verdicts = [
        (v["stage"], v["blame"], v["error"][-400:], v.get("flags"), v.get("timing"), v.get("checks"))
        for v in (r["verdict"] for r in rows)
    ]
    print(metrics, [row["verdict"]["speedup"] for row in passed])
    assert len(passed) == 2 and all(row["score"] > 0.3 for row in passed), verdicts
    assert metrics["learn/gradient_steps"] == 2 and metrics["evaluator/evaluated"] == 1
