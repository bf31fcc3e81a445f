"""What a trainable completion carries besides its text: the exact tokens and the sampler's log-probs.

`kevin.rl.env.Generation` is text plus a finish reason; the learner needs the token ids the sampler
actually produced (re-tokenising the text can split it differently) and, to check that sampler and
learner agree, the sampler's per-token log-probabilities. `SampledGeneration` is a `Generation`, so
`run_episodes` keeps it as is in `Turn.generation`, and the loop reads the extra fields back.

Log-probs are those of the distribution sampled from at temperature T before top-p truncation,
log softmax(logits / T); the learner computes the same quantity (kevin.train.logprobs).
"""

from __future__ import annotations

from dataclasses import dataclass

from kevin.rl.env import Generation


@dataclass(frozen=True)
class SampledGeneration(Generation):
    prompt_token_ids: tuple[int, ...] = ()
    """The prompt exactly as the sampler saw it, chat template and special tokens included."""
    token_ids: tuple[int, ...] = ()
    """The completion's tokens, the end-of-sequence token included when the model emitted it."""
    logprobs: tuple[float, ...] | None = None
    """Sampler log-prob of each completion token; None when the back end did not report them."""

    def __post_init__(self) -> None:
        if self.logprobs is not None and len(self.logprobs) != len(self.token_ids):
            raise ValueError(
                f"{len(self.logprobs)} log-probs for {len(self.token_ids)} tokens; the sampler must "
                "report one log-prob per completion token"
            )
