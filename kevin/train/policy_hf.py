"""A `Policy` backed by transformers `generate` on the learner's own weights (no server needed).

Batched sampling: prompts are wrapped by the `TextCodec` (chat template when the tokenizer has one),
sorted by length, left-padded and generated `batch_size` at a time with the KV cache, temperature
and top-p (top-k off), until the end-of-sequence token, a stop string, or `max_tokens`.
`generate_stream` yields each batch's completions as that batch ends (the next batch is sampled when
the stream is read on), so their candidates can be evaluated while later batches are sampled;
`generate` returns them all in the order of the prompts. Each is a `SampledGeneration`: text,
finish reason (`stop` or `length`), the prompt and completion token ids, and each completion token's
log-prob under the distribution it was drawn from before top-p truncation, log softmax(logits / T)
(kevin.train.logprobs computes the same quantity for the agreement check). Both draw the same
tokens from the same torch seed.

The per-step logits are kept until the batch ends (batch x new tokens x vocabulary floats): fine for
the small models this back end is for; a 32B policy samples through a server (kevin.train.policy_http).

Under FSDP every rank must run the same number of forward passes, so `synced_gpus=True` keeps a
rank that finished early stepping until all have finished (kevin.train.distributed uses this).
Sampling draws from torch's global generator, whose state the checkpoints save.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from kevin.rl.env import Sampling, in_prompt_order
from kevin.train.logprobs import autocast_context
from kevin.train.model import TextCodec
from kevin.train.sampled import SampledGeneration


class HFPolicy:
    def __init__(
        self,
        model: torch.nn.Module,
        codec: TextCodec,
        *,
        device: torch.device,
        batch_size: int = 64,
        stop_strings: Sequence[str] = (),
        autocast_dtype: torch.dtype | None = None,
        synced_gpus: bool = False,
        device_section: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        """`device_section`, when given, is entered around each batch's sampling (and left before
        its completions are yielded): the evaluator's device lock, shared, when it times on this GPU
        (kevin.train.rollout.trainer_device_section)."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.model = model
        self.codec = codec
        self.device = device
        self.batch_size = batch_size
        self.stop_strings = list(stop_strings)
        self.autocast_dtype = autocast_dtype
        self.synced_gpus = synced_gpus
        self.device_section = device_section or contextlib.nullcontext

    def generate(self, prompts: list[str], sampling: Sampling) -> list[SampledGeneration]:
        return in_prompt_order(self.generate_stream(prompts, sampling), len(prompts))

    def generate_stream(
        self, prompts: list[str], sampling: Sampling
    ) -> Iterator[tuple[int, SampledGeneration]]:
        """(prompt index, completion), one batch of the length-sorted prompts at a time."""
        encoded = [self.codec.encode_prompt(prompt) for prompt in prompts]
        order = sorted(range(len(prompts)), key=lambda i: (len(encoded[i]), i))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            with self.device_section():
                batch = self._generate_batch([encoded[i] for i in chunk], sampling)
            yield from zip(chunk, batch)

    def _generate_batch(self, prompts: list[list[int]], sampling: Sampling) -> list[SampledGeneration]:
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.codec.pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        guard = _NonFiniteGuard(self.codec.eos_id)
        options = {"logits_processor": LogitsProcessorList([guard])}
        if self.stop_strings:
            options = {"stop_strings": self.stop_strings, "tokenizer": self.codec.tokenizer}
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), autocast_context(self.device, self.autocast_dtype):
                output = self.model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=attention_mask.to(self.device),
                    do_sample=True,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    top_k=0,
                    max_new_tokens=sampling.max_tokens,
                    use_cache=True,
                    output_logits=True,
                    return_dict_in_generate=True,
                    pad_token_id=self.codec.pad_id,
                    eos_token_id=self.codec.eos_id,
                    synced_gpus=self.synced_gpus,
                    **options,
                )
        finally:
            self.model.train(was_training)
        new_tokens = output.sequences[:, width:].cpu()
        logprobs = _chosen_logprobs(output.logits, new_tokens, sampling.temperature)
        failed = guard.rows(len(prompts))
        return [
            self._record(prompt, new_tokens[row].tolist(), logprobs[row].tolist(), sampling.max_tokens, failed[row])
            for row, prompt in enumerate(prompts)
        ]

    def _record(
        self, prompt: list[int], tokens: list[int], logprobs: list[float], max_tokens: int, failed: bool = False
    ) -> SampledGeneration:
        """Cut one row at its end-of-sequence token (kept) or its padding, and name why it ended
        (`error` when its logits stopped being finite: the sampler failed, not the model)."""
        if failed:
            end = tokens.index(self.codec.eos_id) if self.codec.eos_id in tokens else len(tokens)
            return SampledGeneration(
                text=self.codec.decode_completion(tokens[:end]),
                finish_reason="error",
                completion_tokens=end,
                prompt_token_ids=tuple(prompt),
                token_ids=tuple(tokens[:end]),
                logprobs=tuple(logprobs[:end]),
            )
        if self.codec.eos_id in tokens:
            end = tokens.index(self.codec.eos_id) + 1
            reason = "stop"
        else:
            end = len(tokens)
            while end > 0 and tokens[end - 1] == self.codec.pad_id:
                end -= 1
            reason = "stop" if end < max_tokens else "length"
        kept = tokens[:end]
        return SampledGeneration(
            text=self.codec.decode_completion(kept),
            finish_reason=reason,
            completion_tokens=len(kept),
            prompt_token_ids=tuple(prompt),
            token_ids=tuple(kept),
            logprobs=tuple(logprobs[:end]),
        )


def _chosen_logprobs(
    step_logits: Sequence[torch.Tensor], tokens: torch.Tensor, temperature: float
) -> torch.Tensor:
    """[B, N] log softmax(logits / T) of the sampled tokens, from generate's raw per-step logits."""
    columns = []
    for step, logits in enumerate(step_logits):
        scaled = logits.float() / temperature
        chosen = tokens[:, step].to(scaled.device)
        picked = scaled.gather(-1, chosen[:, None]).squeeze(-1) - torch.logsumexp(scaled, dim=-1)
        columns.append(picked.cpu())
    if not columns:
        return torch.zeros((tokens.shape[0], 0))
    return torch.stack(columns, dim=1)


class _NonFiniteGuard(LogitsProcessor):
    """Ends a row whose next-token scores hold NaN or +inf (a NaN weight or activation) instead of
    letting the sampler's device-side assert kill the process and the run (s12 on the H200): the row
    gets only the end-of-sequence token from then on and is reported by `rows` (its completion comes
    back with finish_reason `error`, which the episode blames on our infrastructure). Marks rows on
    the device, so it adds no host synchronisation per token. -inf is legitimate (top-p masking)."""

    def __init__(self, eos_id: int) -> None:
        self.eos_id = eos_id
        self.failed: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        bad = (torch.isnan(scores) | torch.isposinf(scores)).any(dim=-1)
        self.failed = bad if self.failed is None else self.failed | bad
        ended = torch.full_like(scores, float("-inf"))
        ended[:, self.eos_id] = 0.0
        return torch.where(self.failed[:, None], ended, scores)

    def rows(self, count: int) -> list[bool]:
        return [False] * count if self.failed is None else self.failed.cpu().tolist()

