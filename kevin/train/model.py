"""The policy model and its tokenizer: built from the config, offline for the tiny preset.

`tiny` (ModelConfig.name_or_path): a Llama-architecture causal LM made here from a transformers
config with random weights, and a byte-level BPE tokenizer trained here in about a second on kevin's
own texts (the bundled tasks and their candidates, the prompt templates and the one-shot examples),
with the special tokens `<|endoftext|>` (end of sequence and padding), `<think>` and `</think>`. No
download, so CI and the smoke run work offline. Any other name is loaded with `from_pretrained`.

The tokenizer of a run is saved into the run directory (`tokenizer/`) on the first launch and read
back from there on resume, so a retrained BPE can never change the token ids of a resumed run.

`TextCodec` is the single place where text becomes tokens: the prompt is wrapped in the tokenizer's
chat template when it has one (one user message, generation prompt added), else used as is; a
completion that ended by itself gets the end-of-sequence token. Samplers and the learner both use it.

LoRA (ModelConfig.lora_rank > 0) wraps the model with peft; the frozen base with the adapter disabled
is then the KL reference. Transformers and peft are imported inside the functions that need them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from kevin.train.config import ModelConfig

log = logging.getLogger(__name__)

EOS_TOKEN = "<|endoftext|>"
SPECIAL_TOKENS = (EOS_TOKEN, "<think>", "</think>")
TOKENIZER_DIR = "tokenizer"

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(config: ModelConfig, local_rank: int = 0) -> torch.device:
    if config.device == "cpu" or (config.device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    return torch.device("cuda", local_rank)


def resolve_compute_dtype(config: ModelConfig, device: torch.device) -> torch.dtype:
    """`auto`: bf16 on CUDA, fp32 on the CPU."""
    if config.compute_dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return DTYPES[config.compute_dtype]


def tokenizer_corpus() -> list[str]:
    """kevin's own texts, for the tiny tokenizer: bundled problems and candidates, every template."""
    from kevin.rl import prompts
    from kevin.tasks import bundled_dir

    texts = [path.read_text(encoding="utf-8") for path in sorted(bundled_dir().parent.rglob("*.py"))]
    templates = prompts.DEFAULT_TEMPLATES
    texts += [value for value in vars(templates).values() if isinstance(value, str)]
    texts += list(templates.feedback_fallbacks.values())
    for backend in templates.backends.values():
        texts += [backend.instructions, backend.example_problem, backend.example_candidate]
    return texts


def train_tiny_tokenizer(vocab_size: int, extra_texts: Sequence[str] = ()) -> Any:
    """A byte-level BPE trained on `tokenizer_corpus()` plus `extra_texts` (a warm-start corpus, so
    its kernels take few tokens), as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(tokenizer_corpus() + list(extra_texts), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS_TOKEN, pad_token=EOS_TOKEN)


def load_tokenizer(config: ModelConfig, run_dir: str | Path | None = None) -> Any:
    """The run's tokenizer: the one saved in `run_dir` when there is one, else built or loaded and
    saved there."""
    from transformers import AutoTokenizer

    saved = Path(run_dir) / TOKENIZER_DIR if run_dir is not None else None
    if saved is not None and saved.is_dir():
        tokenizer = AutoTokenizer.from_pretrained(str(saved))
    elif config.is_tiny:
        tokenizer = train_tiny_tokenizer(config.tiny_vocab_size)
    else:
        tokenizer = AutoTokenizer.from_pretrained(config.name_or_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if saved is not None and not saved.is_dir():
        tokenizer.save_pretrained(str(saved))
        # read back what was written, so a first launch and a resumed one use the same object
        tokenizer = AutoTokenizer.from_pretrained(str(saved))
    return tokenizer


def build_model(config: ModelConfig, tokenizer: Any, *, seed: int) -> torch.nn.Module:
    """The policy in `param_dtype` on the CPU (the caller moves or shards it), LoRA applied when
    asked. The tiny model's initial weights are a function of `seed` only."""
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    dtype = DTYPES[config.param_dtype]
    if config.is_tiny:
        architecture = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=config.tiny_hidden_size,
            intermediate_size=config.tiny_intermediate_size,
            num_hidden_layers=config.tiny_layers,
            num_attention_heads=config.tiny_heads,
            num_key_value_heads=config.tiny_kv_heads,
            max_position_embeddings=config.tiny_max_positions,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=None,
            tie_word_embeddings=True,
            attn_implementation=config.attn_implementation,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = LlamaForCausalLM(architecture).to(dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(
            config.name_or_path, dtype=dtype, attn_implementation=config.attn_implementation
        )
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if config.gradient_checkpointing:
        enable_checkpointing(model)
    if config.lora_rank > 0:
        model = apply_lora(model, config)
    return model


def enable_checkpointing(model: torch.nn.Module) -> None:
    """Activation (gradient) checkpointing, non-reentrant, under either name transformers uses."""
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def apply_lora(model: torch.nn.Module, config: ModelConfig) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def is_lora(model: torch.nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return trainable, total


class TextCodec:
    """Text <-> tokens for one tokenizer (implements kevin.train.packing.Tokenize)."""

    def __init__(self, tokenizer: Any, *, chat_template: bool | None = None) -> None:
        self.tokenizer = tokenizer
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.chat_template = has_template if chat_template is None else chat_template
        self.eos_id = int(tokenizer.eos_token_id)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id)

    def format_prompt(self, text: str) -> str:
        if not self.chat_template:
            return text
        messages = [{"role": "user", "content": text}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def encode_prompt(self, text: str) -> list[int]:
        return self.encode_prompts([text])[0]

    def encode_completion(self, text: str, finish_reason: str | None) -> list[int]:
        return self.encode_completions([text], finish_reason)[0]

    def encode_prompts(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode_prompt` of each text, in one call (a batch uses the fast tokenizer's threads)."""
        return self._ids([self.format_prompt(text) for text in texts])

    def encode_completions(self, texts: Sequence[str], finish_reason: str | None) -> list[list[int]]:
        """`encode_completion` of each text, in one call; the end token after those that stopped."""
        tail = [self.eos_id] if finish_reason == "stop" else []
        return [ids + tail for ids in self._ids(list(texts))]

    def _ids(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        return [list(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def decode_completion(self, ids: list[int]) -> str:
        kept = [i for i in ids if i not in (self.eos_id, self.pad_id)]
        return self.tokenizer.decode(kept, skip_special_tokens=False)

    def count_tokens(self, text: str) -> int:
        return len(self.encode_prompt(text))

