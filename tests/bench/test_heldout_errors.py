"""bench/heldout_errors.py sorts a held-out kernel by its `f` against the task's spec: the corpus's
own kernels, edited the ways a small policy gets them wrong, land in the class named for it."""

from __future__ import annotations

import dataclasses
import gzip
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import heldout_errors  # noqa: E402

from kevin.evaluator.result import EvalResult  # noqa: E402
from kevin.train.family import SPEC_FILE, TaskSpec  # noqa: E402
from kevin.train.kernels import variants  # noqa: E402
from kevin.train.kernels.common import NOTE  # noqa: E402

SPEC = TaskSpec(
    number=7, kind="act", ops=(("leaky", 0.1), ("relu", None), ("scale", 3.0)), reduce="",
    shape=(4096, 8192), small_shape=(64, 128), heldout=True,
)  # fmt: skip


def _honest() -> str:
    return _honest_of(SPEC)


def _honest_of(spec: TaskSpec) -> str:
    return next(v.source for v in variants(spec, "cuda") if v.label == "honest")


def test_each_way_of_getting_f_wrong_has_its_class():
    source = _honest()
    assert heldout_errors.classify(SPEC, source, passed=True) == "passed"
    assert heldout_errors.classify(SPEC, source, passed=False) == "f right"
    assert heldout_errors.classify(SPEC, source.replace("v * 3.0f", "v * 0.25f"), False) == "constant"
    swapped = source.replace("    v = fmaxf(v, 0.0f);\n", "").replace(
        "    v = v * 3.0f;\n", "    v = v * 3.0f;\n    v = fmaxf(v, 0.0f);\n"
    )
    assert swapped != source
    assert heldout_errors.classify(SPEC, swapped, False) == "ops"
    other = dataclasses.replace(SPEC, ops=(("leaky", 0.1), ("gelu", None), ("scale", 3.0)))
    assert heldout_errors.classify(SPEC, next(v.source for v in variants(other, "cuda")), False) == "ops"
    assert heldout_errors.classify(SPEC, source.replace("fmaxf(v, 0.0f)", "fmaxf(v, b)"), False) == "no f"
    assert heldout_errors.classify(SPEC, None, False) == "no f"


def test_kernels_written_before_fs_notes_are_read_alike():
    """Kernels from runs before `f` named its ops (s41 and earlier) have the C lines alone: the same
    classes, the notes neither needed nor counted as lines of `f`."""
    source = _honest()
    assert f"    {NOTE}relu\n    v = fmaxf(v, 0.0f);\n" in source
    bare = "\n".join(line for line in source.split("\n") if not line.lstrip().startswith(NOTE))
    assert heldout_errors.read_ops(bare) == heldout_errors.read_ops(source) == [
        ("leaky", "0.1f"), ("relu", None), ("scale", "3.0f")
    ]
    assert heldout_errors.classify(SPEC, bare, passed=False) == "f right"
    assert heldout_errors.classify(SPEC, bare.replace("v * 3.0f", "v * 0.25f"), False) == "constant"


def test_the_init_forms_kernels_are_read_by_their_constant_slots():
    """With the `init` constant form `f` reads `K[i]` where the literal form writes the constant: a
    kernel that applies the right ops with the slots swapped is a `constant` error, not `no f`."""
    spec = dataclasses.replace(SPEC, constant_form="init")
    source = _honest_of(spec)
    assert "v = v * K[1];" in source
    assert heldout_errors.read_ops(source) == [("leaky", "K[0]"), ("relu", None), ("scale", "K[1]")]
    assert heldout_errors.classify(spec, source, passed=False) == "f right"
    swapped = source.replace("v * K[0]", "v * K[9]").replace("v * K[1]", "v * K[0]")
    assert heldout_errors.classify(spec, swapped, False) == "constant"


def test_the_script_counts_a_runs_heldout_file_by_step(tmp_path, capsys):
    (tmp_path / SPEC_FILE).write_text(json.dumps({"size": "large", "tasks": [SPEC.to_dict()]}))
    ok = EvalResult(stage="ok", compiled=True, correct=True, speedup=1.5).to_dict()
    wrong = EvalResult(stage="correctness", compiled=True, correct=False).to_dict()
    rows = [
        {"step": 0, "task": SPEC.task_id, "candidate": _honest(), "verdict": ok},
        {"step": 0, "task": SPEC.task_id, "candidate": _honest().replace("3.0f", "2.0f"), "verdict": wrong},
        {"step": 8, "task": SPEC.task_id, "candidate": "garbled", "verdict": wrong},
    ]
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert heldout_errors.main([str(tmp_path), "--json", str(tmp_path / "e.json")]) == 0
    counts = json.loads((tmp_path / "e.json").read_text())
    assert counts["0"]["passed"] == 1 and counts["0"]["constant"] == 1 and counts["8"]["no f"] == 1
    assert "step  samples" in capsys.readouterr().out
    assert heldout_errors.main([str(tmp_path / "nowhere")]) == 2
    assert "no family.json" in capsys.readouterr().err


def test_the_script_reads_a_committed_runs_gzipped_files(tmp_path, capsys):
    """Committed results keep family.json and heldout.jsonl gzipped: the counts are the same."""
    ok = EvalResult(stage="ok", compiled=True, correct=True, speedup=1.5).to_dict()
    row = {"step": 0, "task": SPEC.task_id, "candidate": _honest(), "verdict": ok}
    (tmp_path / "report").mkdir()
    (tmp_path / "rl").mkdir()
    family = json.dumps({"size": "large", "tasks": [SPEC.to_dict()]})
    (tmp_path / "report" / (SPEC_FILE + ".gz")).write_bytes(gzip.compress(family.encode()))
    (tmp_path / "rl" / "heldout.jsonl.gz").write_bytes(gzip.compress((json.dumps(row) + "\n").encode()))
    assert heldout_errors.main([str(tmp_path), "--json", str(tmp_path / "e.json")]) == 0
    assert json.loads((tmp_path / "e.json").read_text())["0"]["passed"] == 1
