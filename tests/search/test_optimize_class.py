"""`kevin optimize MODULE.py --class NAME --inputs ...`: a module class named by flag becomes a
KernelBench-format problem (kevin.search.wrap). The wrapped source is run here as the evaluator runs
a problem; the command's fake-policy run, its bad input, and one real cpp run (slow) end to end."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from kevin.cli import main
from kevin.errors import UsageError
from kevin.search.shapes import reshape_source
from kevin.search.wrap import parse_init_args, parse_inputs, verify_inputs_shapes, wrap_class
from kevin.tasks import bundled_dir

BLOCK = '''"""A user's module, not in KernelBench format."""
import torch
import torch.nn as nn


class Helper(nn.Module):
    pass


class Block(nn.Module):
    def __init__(self, width, scale=1.0):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.scale = scale

    def forward(self, x, index, mask):
        return torch.relu(self.proj(x)) * self.scale, index.sum(), mask.float().mean()
'''


def _run(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "problem.py", "exec"), namespace)
    return namespace


def test_parse_inputs_reads_shapes_and_dtypes():
    assert parse_inputs("16x1024, 1024:bf16,8:int64,2x3:bool") == [
        ((16, 1024), "float32"),
        ((1024,), "bfloat16"),
        ((8,), "int64"),
        ((2, 3), "bool"),
    ]
    assert parse_init_args('1024, 0.5, "gelu", (3, 3)') == [1024, 0.5, "gelu", (3, 3)]
    assert parse_init_args("  ") == []


@pytest.mark.parametrize("text", ["", "16,", "16x", "x16", "16x1024:fp8", "16*1024", "a"])
def test_malformed_inputs_are_refused(text):
    with pytest.raises(UsageError, match="SHAPE"):
        parse_inputs(text)


def test_init_args_must_be_literals():
    with pytest.raises(UsageError, match="Python literals"):
        parse_init_args("torch.randn(3)")


def test_the_wrapped_source_is_a_problem_of_the_class():
    source = wrap_class(BLOCK, "Block", parse_inputs("4x8,5:int64,6:bool"), [8, 2.0])
    assert source.startswith(BLOCK.rstrip("\n"))  # the user's text, byte for byte, first
    namespace = _run(source)
    assert namespace["Model"] is namespace["Block"]
    assert namespace["get_init_inputs"]() == [8, 2.0]
    torch.manual_seed(0)
    x, index, mask = namespace["get_inputs"]()
    assert x.shape == (4, 8) and x.dtype == torch.float32 and x.std() > 0.3
    assert index.shape == (5,) and index.dtype == torch.int64 and 0 <= int(index.min()) and int(index.max()) < 128
    assert mask.shape == (6,) and mask.dtype == torch.bool
    model = namespace["Model"](*namespace["get_init_inputs"]())
    out, _, _ = model(x, index, mask)
    assert out.shape == (4, 8)
    torch.manual_seed(0)
    again = namespace["get_inputs"]()
    assert torch.equal(again[0], x) and torch.equal(again[1], index)  # seeded like any problem


def test_verify_inputs_is_the_constant_rewrite_of_the_inputs():
    source = wrap_class(BLOCK, "Block", parse_inputs("4x8,5:int64,6:bool"), [8])
    other = reshape_source(source, verify_inputs_shapes("2x8,3:int64,7:bool"))
    shapes = [tuple(t.shape) for t in _run(other)["get_inputs"]()]
    assert shapes == [(2, 8), (3,), (7,)]


@pytest.mark.parametrize(
    ("source", "name", "message"),
    [
        (BLOCK, "Missing", "defines no top-level class Missing (classes there: Block, Helper)"),
        (BLOCK + "\n\ndef get_inputs():\n    return []\n", "Block", "already defines get_inputs"),
        (BLOCK + "\nModel = Block\n", "Block", "already defines Model"),
        ("def f(:\n", "Block", "not valid Python"),
    ],
)
def test_wrap_refuses_what_it_cannot_make_a_problem_of(source, name, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        wrap_class(source, name, parse_inputs("4x8"), [])


def _records(path, completion: str) -> None:
    path.write_text(json.dumps({"task": "block", "trajectory": 0, "turn": 1, "completion": completion}) + "\n")


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("kevin: ") and "\n" not in err, err
    return err


def test_optimize_with_class_runs_on_the_wrapped_problem_and_keeps_it(tmp_path, capsys):
    module = tmp_path / "block.py"
    module.write_text(BLOCK)
    records = tmp_path / "records.jsonl"
    _records(records, "No code this time.")  # a format failure: nothing is built
    argv = ["optimize", str(module), "--class", "Block", "--inputs", "4x8,5:int64,6:bool"]
    argv += ["--init-args", "8, 2.0", "--replay", str(records), "--trajectories", "1", "--turns", "1"]
    argv += ["--backend", "cpp", "--jobs", "1", "--verify-inputs", "2x8,3:int64,7:bool"]
    assert main(argv) == 1  # no winner
    out_dir = tmp_path / "block_kevin"
    problem = (out_dir / "block_problem.py").read_text()
    assert problem == wrap_class(BLOCK, "Block", parse_inputs("4x8,5:int64,6:bool"), [8, 2.0])
    report = (out_dir / "report.md").read_text()
    assert "--class Block --inputs 4x8,5:int64,6:bool --init-args '8, 2.0'" in report, report
    assert "--verify-inputs 2x8,3:int64,7:bool" in report
    # the module's hash is the wrapped problem's: a resume with other inputs is refused
    capsys.readouterr()
    assert main([*argv[:5], "4x9,5:int64,6:bool", *argv[6:]]) == 2
    assert "holds another kevin optimize run" in one_line_error(capsys)
    episodes = [json.loads(line) for line in (out_dir / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 1 and episodes[0]["task"] == "block"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--class", "Block"], "give its forward's example inputs with --inputs"),
        (["--class", "Nope", "--inputs", "4x8"], "defines no top-level class Nope"),
        (["--class", "Block", "--inputs", "4x8:fp8"], "write one SHAPE[:DTYPE] per input"),
        (["--class", "Block", "--inputs", "4x8", "--init-args", "open('x')"], "Python literals"),
        (["--class", "Block", "--inputs", "4x8", "--verify-inputs", "4y8"], "--verify-inputs '4y8'"),
        (["--inputs", "4x8"], "--inputs describe a --class; name the module class with --class NAME"),
    ],
)
def test_bad_class_input_exits_2_with_one_line(tmp_path, capsys, extra, message):
    module = tmp_path / "block.py"
    module.write_text(BLOCK)
    records = tmp_path / "records.jsonl"
    _records(records, "x")
    argv = ["optimize", str(module), "--replay", str(records), "--trajectories", "1", "--turns", "1"]
    assert main([*argv, "--backend", "cpp", *extra]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "block_kevin").exists()


GELU = '''import math

import torch
import torch.nn as nn


class TanhGelu(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))
'''


@pytest.mark.slow
def test_a_class_is_optimised_and_verified_at_other_inputs_by_the_real_evaluator(tmp_path, capsys):
    """The bundled cpp GELU kernel as the one recorded completion for a user's TanhGelu class: it
    passes the real cpp evaluator, is verified again at other inputs, and is written as the drop-in."""
    module = tmp_path / "gelu_block.py"
    module.write_text(GELU)
    kernel = (bundled_dir().parent / "cpp" / "01_gelu_tanh.py").read_text()
    records = tmp_path / "records.jsonl"
    _records(records, f"<think>fuse it</think>\n```python\n{kernel}\n```\nOne fused loop.")
    records.write_text(records.read_text().replace('"block"', '"gelu_block"'))
    argv = ["optimize", str(module), "--class", "TanhGelu", "--inputs", "64x1024", "--verify-inputs", "16x333"]
    argv += ["--replay", str(records), "--trajectories", "1", "--turns", "1", "--backend", "cpp", "--jobs", "1"]
    assert main(argv) == 0, capsys.readouterr()
    out_dir = tmp_path / "gelu_block_kevin"
    dropin = (out_dir / "gelu_block_kevin.py").read_text()
    assert "class ModelNew" in dropin
    result = json.loads((out_dir / "result.json").read_text())
    checks = [check["label"] for kernel in result["verification"] for check in kernel["checks"]]
    assert any("16, 333" in label for label in checks), textwrap.shorten(json.dumps(result), 600)
    # where the time went (#17 item 4): the eager chain of ATen ops against the one extension call
    where = result["where_the_time_went"]
    assert {row["name"] for row in where["reference"]} >= {"aten::tanh", "aten::pow"}, where
    assert where["winner"][0]["name"] == "gelu_tanh" and where["winner"][0]["whose"] == "custom"
    report = (out_dir / "report.md").read_text()
    assert "## Where the time went" in report and "| `gelu_tanh` | custom | 1 |" in report
