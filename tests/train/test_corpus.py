"""The warm-start corpus (kevin.train.corpus, kevin.train.kernels): every honest variant passes the
static gate, every completion parses into its candidate, labels are what the names say, lengths fit
the policy's budget; the CUDA sources compile with nvcc (lite headers, as kevin's fast build does)
and the C++ ones are judged right or wrong by the real cpp back end."""

from __future__ import annotations

import dataclasses
import random
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import torch

from kevin.gate.check import check_source
from kevin.rl.candidate import parse_completion
from kevin.rl.prompts import build_prompt
from kevin.train.corpus import (
    build_corpus,
    constant_draws_of,
    corpus_baseline_picks,
    corpus_stats,
    length_repeats,
    tokenizer_texts,
)
from kevin.train.family import OPS, TaskSpec, c_float, generate_family, load_family, write_family
from kevin.train.kernels import LABELS, variants
from kevin.train.kernels.common import NOTE, op_names

REPO = Path(__file__).resolve().parents[2]
LITE = REPO / "kevin" / "evaluator" / "native" / "lite"


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    directory = tmp_path_factory.mktemp("family")
    write_family(directory, generate_family(0), size="small")
    return load_family(directory)


@pytest.fixture(scope="module")
def init_family(tmp_path_factory):
    directory = tmp_path_factory.mktemp("init_family")
    write_family(directory, generate_family(0, constant_form="init"), size="small")
    return load_family(directory)


@pytest.mark.parametrize("form", ["literal", "init"])
@pytest.mark.parametrize("backend", ["cuda", "cpp"])
def test_every_variant_passes_the_static_gate(backend, form):
    rejected = []
    for spec in generate_family(0, constant_form=form):
        for variant in variants(spec, backend):
            report = check_source(variant.source, backend)
            if not report.ok:
                rejected.append((spec.name, variant.name, report.violations[:1]))
    assert not rejected


def test_labels_and_names_agree_and_every_kind_has_each_label():
    for spec in generate_family(0):
        found = variants(spec, "cuda")
        assert len({v.name for v in found}) == len(found), "variant names are unique per task"
        for variant in found:
            assert variant.label in LABELS
            assert (variant.label == "wrong") == variant.name.startswith("wrong_"), variant.name
        counts = Counter(v.label for v in found)
        assert counts["honest"] >= 8 and counts["slow"] >= 1 and counts["wrong"] >= 2, (spec.name, counts)
        assert found[0].label == "honest"


def test_completions_parse_into_their_candidate_with_the_turn_one_prompt(family):
    specs, train, _ = family
    for backend in ("cuda", "cpp"):
        samples = build_corpus(specs, train, backend)
        assert {s.task_id for s in samples} == {t.id for t in train}
        prompts = {t.id: build_prompt(t, [], backend=backend).text for t in train}
        by_task_variant = {(spec.task_id, v.name): v for spec in specs for v in variants(spec, backend)}
        for sample in samples:
            parsed = parse_completion(sample.completion)
            assert parsed.ok, (sample.task_id, sample.variant, parsed.error)
            assert parsed.candidate + "\n" == by_task_variant[(sample.task_id, sample.variant)].source
            assert parsed.reasoning.startswith("Plan: ") and parsed.summary
            assert sample.prompt == prompts[sample.task_id]


@pytest.mark.parametrize("name", ["h200", "smoke"])
def test_the_corpus_prompts_are_the_ones_the_presets_rl_run_writes(family, name):
    """The warm start learns from the prompts its RL run will show: with the one-shot example or
    without it (the h200 preset's), as `RolloutConfig.one_shot` says."""
    from kevin.rl.env import ScriptedPolicy, ThreadPoolEvaluator, run_episodes
    from kevin.train.loop import episode_config
    from kevin.train.presets import preset

    config = preset(name)
    specs, train, _ = family
    task = train[0]
    samples = build_corpus(specs, [task], "cuda", one_shot=config.rollout.one_shot)
    episodes = dataclasses.replace(episode_config(config, 1), trajectories=1, turns=1, backend="cuda")
    policy = ScriptedPolicy(lambda prompt: "no code")
    with ThreadPoolEvaluator(lambda task, source: None, max_workers=1) as evaluator:
        trajectory = run_episodes([task], policy, evaluator, episodes)[0]
    assert {sample.prompt for sample in samples} == {trajectory.turns[0].prompt.text}
    assert ("Here is an example." in samples[0].prompt) == (name == "smoke")


def test_labels_filter_and_baseline_picks_are_seeded(family):
    specs, train, heldout = family
    honest = build_corpus(specs, train, "cuda", labels=["honest"])
    assert honest and all(s.label == "honest" for s in honest)
    with pytest.raises(ValueError, match="unknown labels"):
        build_corpus(specs, train, "cuda", labels=["fast"])
    picks = corpus_baseline_picks(specs, heldout, "cuda", per_task=4, seed=1)
    assert len(picks) == 4 * len(heldout)
    assert [v.name for _, v in picks] == [
        v.name for _, v in corpus_baseline_picks(specs, heldout, "cuda", per_task=4, seed=1)
    ]
    assert {t.id for t, _ in picks} == {t.id for t in heldout}


def _constants(spec) -> tuple:
    return tuple(c for _, c in spec.ops)


def test_constant_draws_teach_copying_the_prompts_constant_without_new_signatures(family):
    specs, train, heldout = family
    by_id = {s.task_id: s for s in specs}
    samples = build_corpus(specs, train, "cuda", constant_draws=3, seed=5)
    once = build_corpus(specs, train, "cuda")
    assert samples != once and samples == build_corpus(specs, train, "cuda", constant_draws=3, seed=5)
    assert {s.task_id for s in samples} == {t.id for t in train}  # no held-out task, no new id
    for task in train:
        spec = by_id[task.id]
        every = constant_draws_of(spec, task, 1000, random.Random(0))  # all assignments, the task's first
        assert every[0] == (spec, task)
        assert len({_constants(d) for d, _ in every}) == len(every), "assignments differ from each other"
        by_prompt = {build_prompt(t, [], backend="cuda").text: d for d, t in every}
        for other, other_task in every:
            assert other.signature == spec.signature and other.shape == spec.shape
            assert all(c is None or c in OPS[name].constants for name, c in other.ops)
            assert other_task.id == task.id and 'SIZE = "small"' in other_task.source
        mine = [s for s in samples if s.task_id == task.id]
        prompts = {s.prompt for s in mine}
        assert len(prompts) == min(3, len(every)), spec.name
        assert len(mine) == 3 * len(variants(spec, "cuda")), "every task weighs 3 copies, constants or not"
        assert build_prompt(task, [], backend="cuda").text in prompts and prompts <= set(by_prompt)
        for sample in (s for s in mine if s.label != "wrong"):  # right kernels copy the prompt's constants
            code = parse_completion(sample.completion).candidate
            for name, c in by_prompt[sample.prompt].ops:
                if c is not None:
                    assert OPS[name].c_form.format(c=c_float(c)) in code, (sample.variant, name, c)
    # held-out signatures stay out: the corpus's prompts name only training signatures
    held_signatures = {by_id[t.id].signature for t in heldout}
    assert not held_signatures & {by_id[t.id].signature for t in train}


def test_the_plan_names_each_op_and_constant_as_the_prompt_does_in_the_order_f_applies_them(family):
    """The plan is the last text before `f`: each line of `f` should copy a word of it, and it should
    copy the prompt's docstring (TaskSpec.describe), constants included."""
    specs, _, _ = family
    chains = [s for s in specs if len(s.ops) >= 2 and any(c is not None for _, c in s.ops)]
    assert chains
    for spec in chains:
        words = [name if c is None else f"{name}({c!r})" for name, c in spec.ops]
        assert all(word in spec.describe() for word in words)
        for variant in variants(spec, "cuda"):
            at = [variant.plan.find(word) for word in words]
            assert -1 not in at and at == sorted(at), (spec.name, variant.name, variant.plan)


def test_each_line_of_f_follows_a_note_that_copies_the_plans_word_for_its_op(family, init_family):
    """`f` names each op on the line before the op's C line, with the plan's word for it and in the
    plan's order, in every variant that has an `f` (both back ends, both constant forms): the C line
    is then a copy of the note just above it, not a recall of a chain seen in training."""
    seen = 0
    for specs in (family[0], init_family[0]):
        for spec in (s for s in specs if s.ops):
            words = op_names(spec)
            for backend in ("cuda", "cpp"):
                for variant in variants(spec, backend):
                    match = re.search(r"float f\(float v\) \{\n(.*?)\n    return v;", variant.source, re.S)
                    if match is None:
                        continue
                    lines = match.group(1).split("\n")
                    assert lines[0::2] == [f"    {NOTE}{word}" for word in words], (spec.name, variant.name)
                    assert all(line.startswith("    v = ") for line in lines[1::2]), (spec.name, variant.name)
                    at = [variant.plan.find(word) for word in words]
                    assert -1 not in at and at == sorted(at), (spec.name, variant.name, variant.plan)
                    seen += 1
    assert seen > 100


def test_length_repeats_weigh_each_chain_length_of_a_kind_like_its_commonest_one():
    def spec(number, kind, length):
        ops = tuple((name, None) for name in ("relu", "tanh", "gelu")[:length])
        return TaskSpec(number, kind, ops, "", (8, 8), (2, 2), False)

    specs = [spec(1, "act", 1), spec(2, "act", 1)] + [spec(10 + i, "act", 2) for i in range(10)]
    specs += [spec(30, "softmax", 0)] + [spec(31 + i, "softmax", 1) for i in range(3)]
    repeats = length_repeats(specs, cap=8)
    assert repeats["L0_1"] == repeats["L0_2"] == 5 and repeats["L0_10"] == 1  # 2 x 5 ~ 10 x 1
    assert repeats["L0_30"] == 3 and repeats["L0_31"] == 1  # kinds are balanced apart
    assert length_repeats(specs, cap=4)["L0_1"] == 4 and set(length_repeats(specs, cap=1).values()) == {1}


def test_length_cap_multiplies_a_rare_lengths_copies_in_the_corpus(family):
    specs, train, _ = family
    by_id = {s.task_id: s for s in specs}
    plain = build_corpus(specs, train, "cuda", constant_draws=2)
    balanced = build_corpus(specs, train, "cuda", constant_draws=2, length_cap=8)
    repeats = length_repeats([by_id[t.id] for t in train], 8)
    assert max(repeats.values()) > 1
    for task in train:
        count = len(variants(by_id[task.id], "cuda"))
        assert sum(s.task_id == task.id for s in plain) == 2 * count
        assert sum(s.task_id == task.id for s in balanced) == 2 * repeats[task.id] * count
    with pytest.raises(ValueError, match="length_cap"):
        build_corpus(specs, train, "cuda", length_cap=0)


def test_constant_draws_of_a_task_not_written_from_its_spec_keep_it_as_is(family):
    specs, train, _ = family
    spec = next(s for s in specs if s.task_id == train[0].id and any(c is not None for _, c in s.ops))
    edited = dataclasses.replace(train[0], source=train[0].source + "\n# edited\n")
    assert constant_draws_of(spec, edited, 3, random.Random(0)) == [(spec, edited)]
    with pytest.raises(ValueError, match="constant_draws"):
        build_corpus(specs, train, "cuda", constant_draws=0)


def test_completions_fit_the_token_budget(family):
    from kevin.train.model import TextCodec, train_tiny_tokenizer
    from kevin.train.presets import h200

    specs, train, heldout = family
    samples = build_corpus(specs, train + heldout, "cuda")
    codec = TextCodec(train_tiny_tokenizer(h200().model.tiny_vocab_size, tokenizer_texts(samples)))
    completion = [len(codec.encode_completion(s.completion, None)) for s in samples]
    stats = corpus_stats(samples, completion, [codec.count_tokens(p) for p in {s.prompt for s in samples}])
    assert stats["completion_tokens"]["max"] < h200().rollout.max_completion_tokens
    assert stats["completion_tokens"]["median"] < 700
    assert stats["prompt_tokens"]["max"] < 1200
    assert stats["labels"]["wrong"] > 0 and stats["labels"]["slow"] > 0


def _compile_cuda(specs, tmp_path: Path) -> subprocess.CompletedProcess:
    """Every CUDA variant of `specs` in one translation unit (a namespace each), compiled only."""
    parts = ["#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n"]
    for spec in specs:
        for variant in variants(spec, "cuda"):
            code = variant.source.split('source = r"""', 1)[1].split('"""', 1)[0]
            code = "\n".join(line for line in code.splitlines() if not line.startswith("#include"))
            parts.append(f"namespace t{spec.number}_{variant.name} {{\n{code}\n}}\n")
    source = tmp_path / "corpus.cu"
    source.write_text("\n".join(parts))
    command = [
        "nvcc",
        "-std=c++17",
        "-arch=sm_90",
        "-I",
        str(LITE),
        "-c",
        str(source),
        "-o",
        str(tmp_path / "corpus.o"),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compile only, no GPU)")


@needs_nvcc
@pytest.mark.parametrize("form", ["literal", "init"])
def test_cuda_variants_of_every_shape_compile(tmp_path, form):
    specs = generate_family(0, constant_form=form)
    # one task per kind, with and without an op chain, and the residual's two inputs
    chosen = {}
    for spec in specs:
        chosen.setdefault((spec.kind, bool(spec.ops), len(spec.ops) > 1), spec)
    result = _compile_cuda(list(chosen.values()), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


@needs_nvcc
@pytest.mark.slow
def test_cuda_variants_of_the_whole_family_compile(tmp_path):
    result = _compile_cuda(generate_family(0), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("form", ["literal", "init"])
def test_cpp_variants_are_right_or_wrong_as_labelled(family, init_family, tmp_path, form):
    """The real cpp back end judges one task of each kind: honest and slow pass, wrong fail (the C
    expressions are the CUDA kernels' own). With the `init` form the problem's Model and the
    candidate's ModelNew take the constants from get_init_inputs()."""
    from kevin.train.config import EvaluatorConfig
    from kevin.train.rollout import build_evaluator

    specs, train, heldout = family if form == "literal" else init_family
    by_id = {t.id: t for t in train + heldout}
    chosen = {}
    for spec in specs:
        # Not a max reduction: its wrong_bound variant (the last column skipped) is wrong only where
        # a row's max is in that column, which one trial at the small size misses most of the time
        # (it passed in the fresh CI run of 87a1688); at the GPU size with 3 trials, about 0.25%.
        if (spec.ops or spec.kind == "residual") and spec.reduce != "max":
            chosen.setdefault(spec.kind, spec)
    config = EvaluatorConfig(
        max_in_flight=2, timing_budget_ms=10, timing_warmup_ms=2, trials=1, cache_dir=str(tmp_path)
    )
    evaluator = build_evaluator(config, "cpp")
    try:
        jobs = [
            (spec, variant, evaluator.submit(by_id[spec.task_id], variant.source))
            for spec in chosen.values()
            for variant in variants(spec, "cpp")
        ]
        mismatched = []
        for spec, variant, future in jobs:
            result = future.result(timeout=600)
            if result.passed != (variant.label != "wrong"):
                mismatched.append((spec.name, variant.name, result.stage, result.error[:200]))
    finally:
        evaluator.close()
    assert not mismatched


@pytest.mark.gpu
def test_init_forms_cuda_variants_are_right_or_wrong_as_labelled_on_the_gpu(tmp_path):
    """The real CUDA back end judges one large task of each kind with ops that carry constants in
    the `init` form: honest and slow pass, wrong fail. Its kernels read the constants from
    `__constant__` memory that the host wrapper fills on the call's stream. (The literal form's are
    judged on the GPU by every learning run's corpus baseline.)"""
    from kevin.train.config import EvaluatorConfig
    from kevin.train.rollout import build_evaluator

    directory = tmp_path / "family"
    write_family(directory, generate_family(0, constant_form="init"), size="large")
    specs, train, heldout = load_family(directory)
    by_id = {t.id: t for t in train + heldout}
    chosen = {}
    for spec in specs:  # not max: see test_cpp_variants_are_right_or_wrong_as_labelled
        if any(c is not None for _, c in spec.ops) and spec.reduce != "max":
            chosen.setdefault(spec.kind, spec)
    assert len(chosen) == 4
    config = EvaluatorConfig(max_in_flight=8, trials=2, cache_dir=str(tmp_path / "cache"))
    evaluator = build_evaluator(config, "cuda")
    try:
        jobs = []
        for spec in chosen.values():
            found = variants(spec, "cuda")
            slow = [v for v in found if v.label == "slow"][:1]
            # wrong_nosync is a race that a run may win; the other bugs are wrong every time
            wrong = [v for v in found if v.label == "wrong" and v.name != "wrong_nosync"]
            picked = [found[0], *slow, *wrong]
            jobs += [(spec, v, evaluator.submit(by_id[spec.task_id], v.source)) for v in picked]
        verdicts = [(spec, variant, future.result(timeout=900)) for spec, variant, future in jobs]
    finally:
        evaluator.close()
    for spec, variant, result in verdicts:
        print(spec.name, variant.name, result.stage, result.speedup, result.explain())
    assert all(result.blame != "infrastructure" for _, _, result in verdicts), [
        (v.name, r.error[:300]) for _, v, r in verdicts if r.blame == "infrastructure"
    ]
    mismatched = [
        (spec.name, variant.name, result.stage, result.error[:300])
        for spec, variant, result in verdicts
        if result.passed != (variant.label != "wrong")
    ]
    assert not mismatched


def test_a_wide_pools_family_and_corpus_copy_constants_only_from_the_prompt(tmp_path):
    """`constant_pool="wide"`: ~30-60 constants an op, so a recalled constant is almost always wrong.
    The family's constants and every other draw of the corpus come from the wide pool, the pool is
    recorded with the family, and the copying score still finds each constant."""
    from kevin.train.corpus import constant_spans
    from kevin.train.family import WIDE_CONSTANTS, constant_choices, read_constant_pool

    specs = generate_family(0, constant_pool="wide")
    write_family(tmp_path, specs, size="small", constant_pool="wide")
    assert read_constant_pool(tmp_path) == "wide"
    specs, train, _ = load_family(tmp_path)
    drawn = [c for spec in specs for name, c in spec.ops if c is not None]
    assert all(c in WIDE_CONSTANTS[name] for spec in specs for name, c in spec.ops if c is not None)
    assert len(set(drawn)) > len(set(OPS["scale"].constants + OPS["bias"].constants + OPS["leaky"].constants))
    by_id = {s.task_id: s for s in specs}
    samples = build_corpus(specs, train, "cuda", constant_draws=3, seed=1, constant_pool="wide")
    for task in train:
        spec = by_id[task.id]
        every = constant_draws_of(spec, task, 3, random.Random(0), "wide")
        assert len({_constants(d) for d, _ in every}) == len(every)
        for other, _ in every:
            assert all(c is None or c in constant_choices(name, "wide") for name, c in other.ops)
    with_constants = [s for s in samples if s.label == "honest" and any(c for _, c in by_id[s.task_id].ops)]
    assert with_constants and all(constant_spans(s.completion) for s in with_constants)


def test_the_narrow_pool_is_every_earlier_familys(tmp_path):
    from kevin.errors import UsageError
    from kevin.train.family import SPEC_FILE, read_constant_pool

    assert generate_family(3) == generate_family(3, constant_pool="narrow")
    write_family(tmp_path, generate_family(3), size="small")
    record = (tmp_path / SPEC_FILE).read_text()
    (tmp_path / SPEC_FILE).write_text(record.replace('"constant_pool": "narrow", ', ""))  # written before pools
    assert read_constant_pool(tmp_path) == "narrow"
    with pytest.raises(UsageError, match="constant pool"):
        generate_family(0, constant_pool="huge")


def _model_output(source: str, inputs: list) -> torch.Tensor:
    namespace: dict = {}
    exec(compile(source, "<problem>", "exec"), namespace)
    return namespace["Model"](*namespace["get_init_inputs"]())(*inputs)


def test_the_init_form_hands_the_constants_to_the_constructor_and_no_kernel_copies_one(tmp_path):
    """`constant_form="init"`: the same tasks as the literal form, computing the same outputs, with
    the constants as the Model's constructor arguments; the kernels read them from `K` (their
    source is the same whatever the constants), the plans name the ops alone, and the copying score
    finds nothing to copy. The form is recorded per task; a literal family's record is unchanged."""
    from kevin.train.corpus import constant_spans
    from kevin.train.family import SPEC_FILE, read_family

    literal, init = generate_family(0), generate_family(0, constant_form="init")
    assert [dataclasses.replace(s, constant_form="literal") for s in init] == literal
    with_constants = [(a, b) for a, b in zip(literal, init) if b.init_values]
    assert len(with_constants) > 10
    torch.manual_seed(0)
    for plain, carried in with_constants[:12]:
        assert f"def __init__(self, {', '.join(f'c{i}' for i in range(len(carried.init_values)))}):" in (
            carried.source()
        )
        assert f"return {list(carried.init_values)!r}" in carried.source()
        inputs = [torch.randn(*plain.small_shape) for _ in plain.inputs]
        torch.testing.assert_close(
            _model_output(carried.source(), inputs), _model_output(plain.source(), inputs), rtol=0, atol=0
        )
    for spec in init:
        for backend in ("cuda", "cpp"):
            for variant in variants(spec, backend):
                assert not constant_spans(variant.plan + "\n" + variant.source), (spec.name, variant.name)
                assert not any(c_float(c) in variant.source for _, c in spec.ops if c is not None)
    spec = with_constants[0][1]
    other = dataclasses.replace(spec, ops=tuple((n, None if c is None else c + 1.0) for n, c in spec.ops))
    assert [v.source for v in variants(other, "cuda")] == [v.source for v in variants(spec, "cuda")]
    assert other.source() != spec.source()
    write_family(tmp_path / "init", init, size="small")
    assert read_family(tmp_path / "init") == init
    write_family(tmp_path / "literal", literal, size="small")
    assert "constant_form" not in (tmp_path / "literal" / SPEC_FILE).read_text()
