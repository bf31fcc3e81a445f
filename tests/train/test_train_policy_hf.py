"""Sampling with transformers generate on a tiny model (kevin.train.policy_hf)."""

from __future__ import annotations

import torch
from train_helpers import tiny_model, tiny_tokenizer

from kevin.rl.env import Sampling
from kevin.train.logprobs import completion_logprobs
from kevin.train.model import TextCodec
from kevin.train.packing import Sample, collate, unalign
from kevin.train.policy_hf import HFPolicy
from kevin.train.sampled import SampledGeneration

PROMPTS = ["import torch\n", "class ModelNew(nn.Module):\n    def forward(self, x):\n", "def get_inputs():"]


def test_batched_sampling_returns_tokens_and_log_probs_in_prompt_order():
    codec = TextCodec(tiny_tokenizer())
    model = tiny_model(seed=1)
    policy = HFPolicy(model, codec, device=torch.device("cpu"), batch_size=2)
    torch.manual_seed(0)
    outputs = policy.generate(PROMPTS, Sampling(temperature=0.9, top_p=1.0, max_tokens=6))
    assert len(outputs) == 3 and all(isinstance(o, SampledGeneration) for o in outputs)
    for prompt, output in zip(PROMPTS, outputs):
        assert list(output.prompt_token_ids) == codec.encode_prompt(prompt)
        assert 1 <= len(output.token_ids) <= 6 and len(output.logprobs) == len(output.token_ids)
        assert output.finish_reason == ("stop" if output.token_ids[-1] == codec.eos_id else "length")
        assert output.completion_tokens == len(output.token_ids)
    # the learner scores the same tokens the same way (left padding, KV cache and all)
    samples = [Sample(o.prompt_token_ids, o.token_ids, 1.0, index=i) for i, o in enumerate(outputs)]
    learner = unalign(
        completion_logprobs(
            model, collate(samples, codec.pad_id), temperature=0.9, device=torch.device("cpu")
        ),
        samples,
    )
    for output, recomputed in zip(outputs, learner):
        assert torch.allclose(torch.tensor(output.logprobs), recomputed, atol=1e-4)
    assert model.training  # generation does not leave the model in eval mode


def test_sampling_is_reproducible_from_the_torch_seed():
    codec = TextCodec(tiny_tokenizer())
    policy = HFPolicy(tiny_model(seed=1), codec, device=torch.device("cpu"))
    sampling = Sampling(temperature=1.0, top_p=0.9, max_tokens=5)
    torch.manual_seed(7)
    first = policy.generate(PROMPTS, sampling)
    torch.manual_seed(7)
    again = policy.generate(PROMPTS, sampling)
    assert [o.token_ids for o in first] == [o.token_ids for o in again]


def test_streaming_yields_each_batch_as_it_ends_with_the_samples_generate_draws():
    codec = TextCodec(tiny_tokenizer())
    model = tiny_model(seed=1)
    policy = HFPolicy(model, codec, device=torch.device("cpu"), batch_size=2)
    sampling = Sampling(temperature=0.9, top_p=0.95, max_tokens=6)
    torch.manual_seed(3)
    listed = policy.generate(PROMPTS, sampling)
    batches = []
    inner_generate = model.generate

    def counting_generate(*args, **kwargs):
        batches.append(kwargs["input_ids"].shape[0])
        return inner_generate(*args, **kwargs)

    model.generate = counting_generate
    torch.manual_seed(3)
    stream = policy.generate_stream(PROMPTS, sampling)
    first = [next(stream), next(stream)]
    assert batches == [2]  # the first batch's completions come before the second batch is sampled
    streamed = dict(first + list(stream))
    assert batches == [2, 1] and sorted(streamed) == [0, 1, 2]
    for index, output in enumerate(listed):
        again = streamed[index]
        assert (again.text, again.token_ids, again.finish_reason) == (
            output.text,
            output.token_ids,
            output.finish_reason,
        )
        assert again.prompt_token_ids == output.prompt_token_ids and again.logprobs == output.logprobs


class FakeCodec:
    eos_id = 2
    pad_id = 0
    tokenizer = None

    def decode_completion(self, ids):
        return " ".join(str(i) for i in ids if i not in (0, 2))


def test_rows_are_cut_at_end_of_sequence_or_padding():
    policy = HFPolicy(torch.nn.Linear(1, 1), FakeCodec(), device=torch.device("cpu"))
    stopped = policy._record([5], [7, 8, 2, 0, 0], [-1.0, -2.0, -3.0, 0.0, 0.0], max_tokens=5)
    assert stopped.token_ids == (7, 8, 2) and stopped.finish_reason == "stop" and stopped.text == "7 8"
    assert stopped.logprobs == (-1.0, -2.0, -3.0)
    cut = policy._record([5], [7, 8, 9], [-1.0, -1.0, -1.0], max_tokens=3)
    assert cut.finish_reason == "length" and cut.truncated and len(cut.token_ids) == 3
    stop_string = policy._record([5], [7, 8, 0, 0], [-1.0] * 4, max_tokens=4)
    assert stop_string.token_ids == (7, 8) and stop_string.finish_reason == "stop"


def test_a_row_whose_logits_stop_being_finite_ends_as_error_without_killing_the_batch():
    # s12 on the H200: NaN probabilities reached the sampler, whose device-side assert ended the run.
    codec = TextCodec(tiny_tokenizer())
    model = tiny_model(seed=1)
    calls = []

    def poison(module, inputs, output):
        calls.append(1)
        if len(calls) >= 3:  # from the third forward on, the first row of the batch goes NaN
            output[0] = float("nan")
        return output

    model.lm_head.register_forward_hook(poison)
    policy = HFPolicy(model, codec, device=torch.device("cpu"), batch_size=3)
    torch.manual_seed(0)
    outputs = policy.generate(PROMPTS, Sampling(temperature=0.9, top_p=0.9, max_tokens=6))
    shortest = min(range(3), key=lambda i: (len(codec.encode_prompt(PROMPTS[i])), i))
    failed = outputs[shortest]
    assert failed.finish_reason == "error" and len(failed.token_ids) <= 2
    assert all(o.finish_reason in ("stop", "length") for i, o in enumerate(outputs) if i != shortest)

