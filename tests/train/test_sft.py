"""The supervised warm start (kevin.train.sft): the schedule and the masks by hand, the loss falls on
a tiny model, the checkpoint reloads with the same token ids, and `kevin train` starts from it."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from train_helpers import FakeEvaluator, tiny_config

from kevin.cli import main as kevin_main
from kevin.train import copying, sft
from kevin.train.corpus import Sample, build_corpus
from kevin.train.family import generate_family, load_family, write_family
from kevin.train.loop import train


def test_lr_factor_warms_up_then_decays_by_cosine_to_the_floor():
    config = sft.SFTConfig(steps=100, warmup_fraction=0.1, min_lr_fraction=0.1)
    assert sft.lr_factor(0, config) == pytest.approx(0.1)
    assert sft.lr_factor(9, config) == pytest.approx(1.0)
    assert sft.lr_factor(10, config) == pytest.approx(1.0)
    assert sft.lr_factor(55, config) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert sft.lr_factor(100, config) == pytest.approx(0.1)


def test_with_a_time_limit_the_decay_follows_the_steps_or_the_clock_whichever_is_further():
    """A warm start stopped by its time limit used to stop near its peak rate when the machine was
    slower than its planned steps; it now reaches the floor by the limit."""
    config = sft.SFTConfig(steps=100, warmup_fraction=0.1, min_lr_fraction=0.1, lr=1.0, time_limit_s=200.0)
    cosine = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5))
    assert sft.lr_factor(5, config, elapsed_s=150.0) == pytest.approx(0.6)  # the warm-up is by steps
    assert sft.lr_factor(55, config, elapsed_s=10.0) == pytest.approx(cosine)  # the steps lead
    assert sft.lr_factor(20, config, elapsed_s=100.0) == pytest.approx(cosine)  # the clock leads
    assert sft.lr_factor(20, config, elapsed_s=250.0) == pytest.approx(0.1)
    untimed = dataclasses.replace(config, time_limit_s=None)
    assert sft.lr_factor(20, untimed, elapsed_s=1e9) == sft.lr_factor(20, untimed)


def test_collate_masks_the_prompt_and_the_padding():
    batch = sft.collate([([5, 6, 7, 8], 2), ([9, 10, 11], 1)], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8], [9, 10, 11, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert batch["labels"].tolist() == [[-100, -100, 7, 8], [-100, 10, 11, -100]]


def test_batches_visit_every_sample_once_per_epoch():
    draw = sft.batches(5, 2, seed=0)
    epoch = [i for _ in range(3) for i in next(draw)]
    assert sorted(epoch) == [0, 1, 2, 3, 4]


def test_bad_settings_are_usage_errors():
    from kevin.errors import UsageError

    with pytest.raises(UsageError, match="batch_size"):
        sft.SFTConfig(batch_size=0)
    with pytest.raises(UsageError, match="corpus is empty"):
        sft.prepare(sft.SFTConfig(), [])


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("family")
    write_family(directory, generate_family(0)[:1] + generate_family(0)[33:34], size="small")
    specs, tasks, _ = load_family(directory)
    return build_corpus(specs, tasks, "cpp")[:4]


def tiny_sft(**changes) -> sft.SFTConfig:
    base = sft.sft_preset("smoke")
    model = dataclasses.replace(base.model, tiny_layers=1, tiny_hidden_size=32, tiny_intermediate_size=64)
    return dataclasses.replace(
        base, model=model, **{"steps": 12, "batch_size": 2, "lr": 1e-2, "log_every": 100, **changes}
    )


@pytest.fixture(scope="module")
def checkpoint(small_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft")
    result = sft.train_sft(tiny_sft(), small_corpus, out, out=lambda line: None)
    return out, result


def test_loss_falls_and_the_log_has_every_step(checkpoint):
    out, result = checkpoint
    assert result.steps == 12 and len(result.losses) == 12
    assert sum(result.losses[-3:]) / 3 < 0.8 * sum(result.losses[:3]) / 3, result.losses
    rows = (out / sft.SFT_LOG).read_text().splitlines()
    assert len(rows) == 12 and '"loss"' in rows[0]
    assert (out / sft.SFT_RECORD).exists()


def test_checkpoint_reloads_with_the_same_token_ids_and_weights(checkpoint, small_corpus):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kevin.train.model import TextCodec

    out, _ = checkpoint
    prepared = sft.prepare(tiny_sft(), small_corpus)  # the same corpus trains the same tokenizer
    reloaded = TextCodec(AutoTokenizer.from_pretrained(str(out)))
    sample = small_corpus[0]
    assert reloaded.encode_prompt(sample.prompt) == prepared.codec.encode_prompt(sample.prompt)
    assert reloaded.encode_completion(sample.completion, "stop") == prepared.codec.encode_completion(
        sample.completion, "stop"
    )
    model = AutoModelForCausalLM.from_pretrained(str(out))
    ids = torch.tensor([reloaded.encode_prompt(sample.prompt)[:32]])
    assert torch.isfinite(model(input_ids=ids).logits).all()


def test_time_limit_stops_early_and_still_writes_the_checkpoint(small_corpus, tmp_path):
    result = sft.train_sft(
        tiny_sft(steps=500, time_limit_s=0.5), small_corpus, tmp_path, out=lambda line: None
    )
    assert result.stopped_by_time and result.steps < 500
    assert (tmp_path / "config.json").exists() and (tmp_path / "tokenizer.json").exists()


def test_the_rl_loop_starts_from_the_checkpoint(checkpoint, small_corpus, tmp_path):
    from train_helpers import tasks as helper_tasks

    out, result = checkpoint
    lines: list[str] = []
    config = tiny_config(model={"name_or_path": str(out)}, loop={"steps": 1})
    train(
        config,
        tmp_path / "run",
        tasks=helper_tasks(2),
        evaluator_factory=lambda run: FakeEvaluator(),
        out=lines.append,
    )
    assert f"{result.parameters / 1e6:.1f}M parameters" in lines[0]
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(str(tmp_path / "run" / "tokenizer"))
    text = small_corpus[0].completion
    assert saved(text)["input_ids"] == AutoTokenizer.from_pretrained(str(out))(text)["input_ids"]


def test_kevin_sft_command(tmp_path, capsys):
    assert kevin_main(["sft", "--family", str(tmp_path / "missing"), "--out", str(tmp_path / "ck")]) == 2
    assert "kevin family --out DIR" in capsys.readouterr().err
    family = tmp_path / "family"
    write_family(family, generate_family(0)[:2] + generate_family(0)[40:41], size="small")
    argv = ["sft", "--family", str(family), "--out", str(tmp_path / "ck"), "--backend", "cpp", "--steps", "2"]
    assert kevin_main(argv) == 0
    assert "checkpoint in" in capsys.readouterr().out
    assert kevin_main(argv) == 2  # the folder holds a model now
    assert "already holds a model" in capsys.readouterr().err


def test_samples_longer_than_max_tokens_are_dropped(small_corpus):
    short = Sample("L0_1", "x", "honest", "Write a kernel.", "Plan: none.")
    prepared = sft.prepare(tiny_sft(max_tokens=100), [small_corpus[0], short])
    assert prepared.dropped == 1 and len(prepared.encoded) == 1
    ids, prompt_length = prepared.encoded[0]
    assert ids[-1] == prepared.codec.eos_id and 0 < prompt_length < len(ids)


def test_batch_encoding_gives_the_ids_one_call_per_sample_gives(tmp_path):
    """encode_samples encodes each distinct prompt once and the completions in one batch; the ids
    must be exactly those of the per-text calls that samplers and the learner make (TextCodec)."""
    write_family(tmp_path, generate_family(0)[30:36], size="small")
    specs, tasks, _ = load_family(tmp_path)
    samples = build_corpus(specs, tasks, "cuda", constant_draws=2)
    samples.append(Sample("L0_1", "x", "honest", "Write a kernel.", "Plan: none."))
    prepared = sft.prepare(tiny_sft(max_tokens=4096), samples)
    codec = prepared.codec
    assert len({s.prompt for s in samples}) < len(samples), "prompts repeat across variants"
    expected = []
    for sample in samples:
        prompt = codec.encode_prompt(sample.prompt)
        expected.append((prompt + codec.encode_completion(sample.completion, "stop"), len(prompt)))
    assert prepared.encoded == expected and prepared.dropped == 0
    # the lengths corpus_stats reads come from the same pass, nothing encoded twice
    assert prepared.completion_tokens == [len(codec.encode_completion(s.completion, None)) for s in samples]
    assert sorted(prepared.prompt_tokens) == sorted(codec.count_tokens(p) for p in {s.prompt for s in samples})
    texts = [s.completion for s in samples[:3]]
    assert codec.encode_completions(texts, "length") == [codec.encode_completion(t, "length") for t in texts]
    assert codec.encode_prompts([]) == [] and codec.encode_completions([], "stop") == []


def test_validation_loss_is_the_models_own_mean_completion_loss(small_corpus):
    from kevin.train.model import build_model

    config = tiny_sft()
    prepared = sft.prepare(config, small_corpus)
    model = build_model(config.model, prepared.tokenizer, seed=0)
    rows = prepared.encoded[:1]
    with torch.no_grad():
        expected = model(**sft.collate(rows, prepared.codec.pad_id)).loss.item()  # HF: mean over labels
    scores = copying.validation_scores(model, rows, prepared.codec.pad_id, 4, torch.device("cpu"), None)
    assert scores == {"loss": pytest.approx(expected, rel=1e-5)}  # no marks: no constants scored
    assert model.training  # left as it was found


@pytest.fixture(scope="module")
def constant_corpus(tmp_path_factory):
    """A task with two constants (tanh, leaky(0.1), bias(0.1)): honest and wrong variants."""
    directory = tmp_path_factory.mktemp("family")
    write_family(directory, generate_family(0)[11:12], size="small")
    specs, tasks, _ = load_family(directory)
    return build_corpus(specs, tasks, "cpp")


def test_the_constants_a_completion_copies_are_found_in_its_plan_and_its_f(constant_corpus):
    from kevin.train.corpus import constant_spans

    honest = next(sample for sample in constant_corpus if sample.label == "honest")
    spans = constant_spans(honest.completion)
    assert [honest.completion[a:b] for a, b in spans] == ["0.1", "0.1", "0.1f", "0.1f"]
    plan_end = honest.completion.index("\n")
    assert [a < plan_end for a, _ in spans] == [True, True, False, False]
    assert "v = v > 0.0f ? v : v * 0.1f;" in honest.completion and "v = v + 0.1f;" in honest.completion


def test_validation_marks_the_tokens_of_each_copied_constant(constant_corpus):
    from kevin.train.corpus import constant_spans

    config = tiny_sft()
    prepared = sft.prepare(config, constant_corpus)
    rows, marks = copying.validation_rows(constant_corpus, prepared.codec, config.max_tokens)
    assert rows == sft.encode_samples(constant_corpus, prepared.codec, config.max_tokens)[0]
    tokenizer = prepared.tokenizer
    for sample, (ids, prompt_length), found in zip(constant_corpus, rows, marks):
        if sample.label == "wrong":
            assert found == []  # a slip changes a constant on purpose: not scored
            continue
        assert len(found) == len(constant_spans(sample.completion)) >= 2  # the plan's, and f's where it has one
        texts = [tokenizer.decode([ids[i] for i in positions]) for positions in found]
        assert all("0.1" in text and len(text) <= len("leaky(0.1)") for text in texts), texts
        assert all(position >= prompt_length for positions in found for position in positions)


class _Copier(torch.nn.Module):
    """Logits that put `margin` on the actual next token, except at `missed` positions, where they
    put it on token 0 instead."""

    def __init__(self, vocabulary: int, margin: float, missed: set[int] = frozenset()) -> None:
        super().__init__()
        self.vocabulary, self.margin, self.missed = vocabulary, margin, missed

    def forward(self, input_ids, attention_mask=None):
        logits = torch.zeros(*input_ids.shape, self.vocabulary)
        following = torch.roll(input_ids, -1, dims=1)
        logits.scatter_(2, following.unsqueeze(2), self.margin)
        for position in self.missed:
            logits[:, position - 1] = 0.0
            logits[:, position - 1, 0] = self.margin
        return type("Output", (), {"logits": logits})()


def test_constants_are_scored_by_argmax_and_by_probability():
    rows = [([5, 6, 7, 8, 9, 10], 2)]
    marks = [[[3, 4], [5]]]  # two constants: tokens 8 and 9, then token 10
    token = math.exp(4.0) / (math.exp(4.0) + 15)  # a vocabulary of 16, the right token 4 above the rest
    exact = copying.validation_scores(_Copier(16, 4.0), rows, 0, 4, torch.device("cpu"), None, marks)
    assert exact["constants"] == 1.0
    assert exact["constant_p"] == pytest.approx((token**2 + token) / 2, rel=1e-5)
    missed = copying.validation_scores(_Copier(16, 4.0, {4}), rows, 0, 4, torch.device("cpu"), None, marks)
    assert missed["constants"] == 0.5  # the first constant's second token is another's
    wrong = 1 / (math.exp(4.0) + 15)
    assert missed["constant_p"] == pytest.approx((token * wrong + token) / 2, rel=1e-5)
    assert exact["loss"] == pytest.approx(-math.log(token), rel=1e-5)


def test_held_out_loss_is_logged_at_the_start_every_val_every_steps_and_at_the_end(
    small_corpus, constant_corpus, tmp_path
):
    train_on, held_out = small_corpus[:2], small_corpus[2:] + constant_corpus[:2]
    result = sft.train_sft(
        tiny_sft(steps=7, val_every=3), train_on, tmp_path, validation=held_out, out=lambda line: None
    )
    assert [step for step, _ in result.val_losses] == [1, 3, 6, 7]
    rows = [json.loads(line) for line in (tmp_path / sft.SFT_LOG).read_text().splitlines()]
    assert [row["step"] for row in rows if "val_loss" in row] == [1, 3, 6, 7]
    record = json.loads((tmp_path / sft.SFT_RECORD).read_text())
    assert record["validation_samples"] == 4 and len(record["val_losses"]) == 4
    constants = [row for row in rows if "val_constants" in row]
    assert [row["step"] for row in constants] == [1, 3, 6, 7]  # constant_corpus's non-wrong samples copy two
    assert [step for step, _, _ in record["val_constants"]] == [1, 3, 6, 7]
    assert all(0 <= row["val_constants"] <= 1 and 0 < row["val_constant_p"] <= 1 for row in constants)
    assert sft.spread(list(range(10)), 4) == [0, 2, 5, 7]


def test_the_weighted_loss_by_hand():
    """Three labelled positions with losses l1, l2, l3 (the middle one a constant's, weight 4): the
    objective is (l1 + 4 l2 + l3) / 6 and the plain mean (l1 + l2 + l3) / 3; weight 1 is HF's loss."""
    rows = [([1, 2, 3, 0], 1)]
    batch = sft.collate(rows, pad_id=0)  # labels: positions 1..3 (2, 3, 0)
    logits = torch.zeros(1, 4, 4)
    logits[0, 0, 2] = 2.0  # predicts position 1's token 2 with margin 2
    logits[0, 1, 1] = 3.0  # position 2's token is 3: wrong by margin 3
    logits[0, 2, 0] = 1.0  # position 3's token 0 with margin 1
    losses = [
        -math.log(math.exp(2) / (math.exp(2) + 3)),
        -math.log(1 / (math.exp(3) + 3)),
        -math.log(math.exp(1) / (math.exp(1) + 3)),
    ]
    weights = copying.token_weights(rows, [[[1]]], 4.0, 4)  # completion index 1 = row position 2
    assert weights.tolist() == [[0.0, 1.0, 4.0, 1.0]]
    objective, plain = copying.weighted_loss(logits, batch["labels"], weights)
    assert objective.item() == pytest.approx((losses[0] + 4 * losses[1] + losses[2]) / 6, rel=1e-5)
    assert plain.item() == pytest.approx(sum(losses) / 3, rel=1e-5)
    flat, _ = copying.weighted_loss(logits, batch["labels"], copying.token_weights(rows, [[[1]]], 1.0, 4))
    hf = torch.nn.functional.cross_entropy(logits[0, :-1], batch["labels"][0, 1:])
    assert flat.item() == pytest.approx(hf.item(), rel=1e-6)


def test_prepare_marks_each_kept_rows_constants_beside_it(constant_corpus, small_corpus):
    """With constant_weight, `prepare` keeps each row's constant tokens in the row's order, a sample
    dropped for its length dropped from both; they are the tokens validation scores."""
    config = tiny_sft(constant_weight=5.0)
    short = Sample("L0_1", "x", "honest", "p", "ok")  # keeps the marks' order honest: no constants
    too_long = dataclasses.replace(constant_corpus[0], completion=constant_corpus[0].completion * 40)
    samples = [too_long, *constant_corpus, short]
    prepared = sft.prepare(config, samples)
    assert prepared.dropped == 1 and len(prepared.marks) == len(prepared.encoded) == len(constant_corpus) + 1
    _, scored = copying.validation_rows(samples, prepared.codec, config.max_tokens)
    for (_, prompt_length), marks, positions in zip(prepared.encoded, prepared.marks, scored):
        assert [[prompt_length + j for j in tokens] for tokens in marks] == positions
    assert prepared.marks[-1] == [] and any(prepared.marks)
    assert sft.prepare(tiny_sft(), samples).marks == []  # weight 1: nothing to find


def test_training_with_constant_weight_logs_the_plain_loss_and_the_objective(constant_corpus, tmp_path):
    config = tiny_sft(steps=4, constant_weight=8.0)
    result = sft.train_sft(config, constant_corpus, tmp_path, out=lambda line: None)
    rows = [json.loads(line) for line in (tmp_path / sft.SFT_LOG).read_text().splitlines()]
    assert len(rows) == 4 and all(row["objective"] > 0 and row["loss"] > 0 for row in rows)
    assert any(abs(row["objective"] - row["loss"]) > 1e-4 for row in rows)  # the constants weigh more
    record = json.loads((tmp_path / sft.SFT_RECORD).read_text())
    assert record["config"]["constant_weight"] == 8.0 and result.steps == 4
    plain = sft.train_sft(tiny_sft(steps=1), constant_corpus, tmp_path / "plain", out=lambda line: None)
    assert "objective" not in json.loads((tmp_path / "plain" / sft.SFT_LOG).read_text().splitlines()[0])
    assert plain.steps == 1


def test_kevin_sft_refuses_a_weight_that_is_not_positive(tmp_path, capsys):
    argv = ["sft", "--family", str(tmp_path), "--out", str(tmp_path / "o"), "--constant-weight", "0"]
    assert kevin_main(argv) == 2
    assert "--constant-weight 0.0: use a positive weight" in capsys.readouterr().err
