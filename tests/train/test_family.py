"""The generated task family (kevin.train.family): deterministic, a held-out split of unseen
combinations, files the task loader reads, references that run on the CPU at the small size."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from kevin.cli import main as kevin_main
from kevin.errors import UsageError
from kevin.tasks import load_tasks
from kevin.train.family import (
    HELDOUT_COUNTS,
    KINDS,
    OPS,
    SPLIT_FILE,
    TRAIN_COUNTS,
    capacity,
    generate_family,
    heldout_counts,
    is_combination,
    load_family,
    read_family,
    rl_only_ids,
    train_counts,
    write_family,
)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    directory = tmp_path_factory.mktemp("family")
    specs = generate_family(0)
    write_family(directory, specs, size="small")
    return directory, specs


def test_same_seed_same_family_other_seed_another():
    assert generate_family(0) == generate_family(0)
    assert generate_family(0) != generate_family(1)


def test_default_counts_and_numbering():
    specs = generate_family(0)
    assert [s.number for s in specs] == list(range(1, 49))
    assert sum(not s.heldout for s in specs) == 40 and sum(s.heldout for s in specs) == 8
    assert all(not s.heldout for s in specs[:40])  # training tasks first
    assert {s.kind for s in specs if s.heldout} == set(KINDS)


def test_the_problem_text_names_what_it_computes_and_no_task_number():
    """A number in the text keyed each training chain: the warm start could look a chain up by it
    instead of reading the forward, and a held-out task's number is a key it never saw."""
    for spec in generate_family(0):
        renumbered = dataclasses.replace(spec, number=spec.number + 700)
        assert renumbered.source() == spec.source(), spec.name
        assert f"{spec.describe()}." in spec.source()


def test_heldout_tasks_are_unseen_combinations_of_seen_pieces():
    specs = generate_family(0)
    train = [s for s in specs if not s.heldout]
    heldout = [s for s in specs if s.heldout]
    train_signatures = {s.signature for s in train}
    assert not train_signatures & {s.signature for s in heldout}
    for spec in heldout:
        assert spec.ops, f"{spec.name}: a held-out task combines something"
    # every op alone is a training task, as are the plain reductions and the plain softmax
    assert {("act", (name,), "") for name in OPS} <= train_signatures
    assert {("rowreduce", (), r) for r in ("sum", "max", "mean")} <= train_signatures
    assert ("softmax", (), "") in train_signatures


def test_other_counts_and_bad_kinds():
    specs = generate_family(3, train_counts={"act": 3, "softmax": 1}, heldout_counts={"act": 1})
    assert [s.kind for s in specs] == ["act", "act", "act", "softmax", "act"]
    assert specs[-1].heldout and len(specs[-1].ops) >= 2
    from kevin.errors import UsageError

    with pytest.raises(UsageError, match="unknown task kind"):
        generate_family(0, train_counts={"matmul": 1})


def test_train_counts_keep_the_default_proportions_and_sum_to_the_total():
    assert train_counts(40) == TRAIN_COUNTS
    assert train_counts(120) == {kind: 3 * count for kind, count in TRAIN_COUNTS.items()}
    for total in (4, 5, 41, 77, 199):
        counts = train_counts(total)
        assert sum(counts.values()) == total and min(counts.values()) >= 1, total
    specs = generate_family(0, train_counts=train_counts(120))
    assert sum(not s.heldout for s in specs) == 120 and sum(s.heldout for s in specs) == 8
    assert not {s.signature for s in specs if not s.heldout} & {s.signature for s in specs if s.heldout}
    from kevin.errors import UsageError

    with pytest.raises(UsageError, match="at least 4"):
        train_counts(3)


def test_written_family_loads_through_the_task_loader(written):
    directory, specs = written
    tasks = load_tasks(str(directory))
    assert [t.id for t in tasks] == [s.task_id for s in specs]
    assert read_family(directory) == specs
    split = json.loads((directory / SPLIT_FILE).read_text())
    assert split["holdout"] == [s.task_id for s in specs if s.heldout]
    assert not set(split["train"]) & set(split["holdout"])
    _, train, heldout = load_family(directory)
    assert len(train) == 40 and len(heldout) == 8
    assert all('SIZE = "small"' in t.source for t in tasks)


def test_large_size_rewrites_the_size_line(tmp_path):
    specs = generate_family(0)[:2]
    write_family(tmp_path, specs, size="large")
    source = (tmp_path / specs[0].filename).read_text()
    assert 'SIZE = "large"' in source and f"{specs[0].shape}".replace(" ", "") in source.replace(" ", "")


def _run_reference(source: str):
    namespace: dict = {}
    exec(compile(source, "<family task>", "exec"), namespace)  # our own generated problem file
    model = namespace["Model"](*namespace["get_init_inputs"]())
    torch.manual_seed(0)
    inputs = namespace["get_inputs"]()
    return inputs, model(*inputs)


def test_every_reference_runs_on_the_cpu_and_computes_its_description(written):
    directory, specs = written
    for spec in specs:
        inputs, output = _run_reference((directory / spec.filename).read_text())
        rows, cols = spec.small_shape
        assert inputs[0].shape == (rows, cols) and len(inputs) == len(spec.inputs)
        expected_shape = (rows,) if spec.kind == "rowreduce" else (rows, cols)
        assert output.shape == expected_shape and torch.isfinite(output).all(), spec.name
        if spec.kind == "softmax":
            assert torch.allclose(output.sum(-1), torch.ones(rows), atol=1e-5)
        if spec.kind == "rowreduce" and spec.reduce == "sum":
            assert output.min() > 1.0, "row sums stay far from zero"


def test_reference_of_a_chain_matches_the_ops_by_hand():
    spec = next(s for s in generate_family(0) if s.kind == "residual" and len(s.ops) == 2)
    inputs, output = _run_reference(spec.source())
    value = inputs[0] + inputs[1]
    by_hand = {
        "relu": lambda v, c: torch.clamp(v, min=0),
        "gelu": lambda v, c: 0.5 * v * (1 + torch.tanh(0.7978845608 * (v + 0.044715 * v**3))),
        "sigmoid": lambda v, c: 1 / (1 + torch.exp(-v)),
        "silu": lambda v, c: v / (1 + torch.exp(-v)),
        "tanh": lambda v, c: torch.tanh(v),
        "scale": lambda v, c: v * c,
        "bias": lambda v, c: v + c,
        "leaky": lambda v, c: torch.where(v > 0, v, v * c),
    }
    for name, constant in spec.ops:
        value = by_hand[name](value, constant)
    assert torch.allclose(output, value, atol=1e-5, rtol=1e-5)


def test_kevin_family_command(tmp_path, capsys):
    out = tmp_path / "fam"
    assert kevin_main(["family", "--out", str(out), "--size", "small", "--seed", "2"]) == 0
    assert "40 training and 8 held-out tasks (small)" in capsys.readouterr().out
    assert read_family(out) == generate_family(2)
    assert (
        kevin_main(["family", "--out", str(tmp_path / "big"), "--size", "small", "--train-tasks", "60"]) == 0
    )
    assert "60 training and 8 held-out tasks (small)" in capsys.readouterr().out
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "99_foreign.py").write_text("x = 1\n")
    assert kevin_main(["family", "--out", str(tmp_path / "other")]) == 2
    assert "write the family to an empty folder" in capsys.readouterr().err
    init = tmp_path / "init"
    assert kevin_main(["family", "--out", str(init), "--size", "small", "--constant-form", "init"]) == 0
    assert read_family(init) == generate_family(0, constant_form="init")
    assert any("def __init__(self, c0" in path.read_text() for path in init.glob("*.py"))
    capsys.readouterr()
    assert kevin_main(["family", "--out", str(tmp_path / "bad"), "--constant-form", "argument"]) == 2
    assert "--constant-form" in capsys.readouterr().err


def test_train_counts_fill_each_kind_to_its_capacity_and_no_further():
    from kevin.errors import UsageError

    room = {kind: capacity(kind) for kind in KINDS}
    for total in range(4, sum(room.values()) + 1):
        counts = train_counts(total)
        assert sum(counts.values()) == total
        assert all(1 <= counts[kind] <= room[kind] for kind in KINDS), (total, counts)
    assert train_counts(sum(room.values())) == room
    with pytest.raises(UsageError, match="training signatures"):
        train_counts(sum(room.values()) + 1)
    specs = generate_family(0, train_counts=train_counts(600))
    train = [s for s in specs if not s.heldout]
    held = {s.signature for s in specs if s.heldout}
    assert len(train) == 600 and len({s.signature for s in train}) == 600
    assert not held & {s.signature for s in train}


def test_rl_only_tasks_are_seeded_training_combinations():
    specs = generate_family(0, train_counts=train_counts(600))
    by_id = {spec.task_id: spec for spec in specs}
    chosen = rl_only_ids(specs, 100, seed=3)
    assert chosen == rl_only_ids(specs, 100, seed=3) and chosen != rl_only_ids(specs, 100, seed=4)
    assert len(set(chosen)) == 100 and chosen == sorted(chosen, key=lambda i: by_id[i].number)
    assert all(not by_id[i].heldout and is_combination(by_id[i]) for i in chosen)
    assert not any(is_combination(s) for s in specs if len(s.ops) == 0 and s.kind != "act")
    assert not is_combination(next(s for s in specs if s.kind == "act" and len(s.ops) == 1))
    pool = sum(not s.heldout and is_combination(s) for s in specs)
    with pytest.raises(UsageError, match=f"has {pool} training combinations"):
        rl_only_ids(specs, pool + 1)


def test_heldout_counts_scale_the_default_and_training_counts_make_room():
    assert heldout_counts(8) == HELDOUT_COUNTS
    assert heldout_counts(16) == {"act": 6, "residual": 2, "rowreduce": 4, "softmax": 4}
    held = heldout_counts(16)
    counts = train_counts(700, held)
    assert sum(counts.values()) == 700 and all(counts[k] <= capacity(k, held[k]) for k in KINDS)
    specs = generate_family(0, train_counts=counts, heldout_counts=held)
    assert sum(s.heldout for s in specs) == 16
    train_signatures = {s.signature for s in specs if not s.heldout}
    assert not train_signatures & {s.signature for s in specs if s.heldout}
    with pytest.raises(UsageError, match="--heldout-tasks 3"):
        heldout_counts(3)
    with pytest.raises(UsageError, match="ask for fewer"):
        heldout_counts(1000)
    with pytest.raises(UsageError, match="training signatures"):
        train_counts(sum(capacity(k) for k in KINDS), held)  # the default's room, less 8 more held out
