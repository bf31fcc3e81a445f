"""The dedupe by code (#18): a problem's operator sequence read from its forward, and the generator
rejecting KernelBench's sequences from both sources (forward code, file names), counted per source.

Everything here parses text; nothing imports or runs a problem.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kevin.cli import main
from kevin.tasks import operators
from kevin.tasks.dedupe import load_kernelbench
from kevin.tasks.generate import MANIFEST_FILE, GenerateOptions, draw_task, generate_set
from kevin.tasks.kbcode import read_forward

PROBLEM = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        {init}

    def forward(self, x):
        {forward}


batch_size = 4
in_channels, out_channels, kernel_size = 3, 8, 3


def get_inputs():
    return [torch.rand(batch_size, in_channels, 16, 16)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
"""


def problem(init: list[str], forward: list[str]) -> str:
    return PROBLEM.format(init="\n        ".join(init or ["pass"]), forward="\n        ".join(forward))


def key(source: str) -> str:
    reading = read_forward(source)
    assert not reading.unhandled, reading.unhandled
    return operators.sequence_key(reading.ops)


# Attempt 15 of seed 0 draws Conv2d -> Swish -> HardSwish; this problem computes exactly that, with
# KernelBench's spellings (a module attribute, both activations written out), under another name.
MISNAMED = (
    "3_Conv2d_GELU_Dropout",
    problem(
        ["self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)"],
        [
            "x = self.conv(x)",
            "x = x * torch.sigmoid(x)  # Swish",
            "x = x * torch.clamp((x + 3) / 6, 0, 1)",
            "return x",
        ],
    ),
)
# Attempt 4 of seed 0 draws Matmul -> LogSumExp -> BiasAdd, which this file's *name* says; its forward
# does something else, so only the file name can reject that draw.
NAME_ONLY = (
    "4_Matmul_LogSumExp_BiasAdd",
    problem(["self.fc = nn.Linear(in_channels, out_channels)"], ["return torch.relu(self.fc(x))"]),
)


def _fake_kernelbench(root: Path, files: list[tuple[str, str]]) -> Path:
    (root / "level2").mkdir(parents=True)
    for stem, source in files:
        (root / "level2" / f"{stem}.py").write_text(source)
    return root


# --- reading a forward ---------------------------------------------------------------------------------


def test_generated_tasks_read_back_as_their_own_sequence():
    # the generator's own spellings of every operator map back onto its vocabulary
    for attempt in range(300):
        task = draw_task(1, attempt)
        assert key(task.source()) == task.key, (task.ops, read_forward(task.source()))


@pytest.mark.parametrize(
    "init, forward, expected",
    [
        (
            ["self.fc = nn.Linear(8, 8)", "self.act = nn.LeakyReLU(0.2)"],
            ["return self.act(self.fc(x))"],
            "gemm-leakyrelu",
        ),
        ([], ["y = x @ x.T", "return y.relu()"], "gemm-relu"),
        ([], ["x = torch.matmul(x, x)", "return F.relu(x)"], "gemm-relu"),
        (
            ["self.s = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())", "self.p = nn.MaxPool2d(2)"],
            ["return self.p(self.s(x))"],
            "conv2d-relu-maxpool",
        ),
        (
            ["self.bias = nn.Parameter(torch.randn(8, 1, 1))"],
            ["x = x + self.bias", "return x * 2.0"],
            "add-multiply",
        ),
        ([], ["x = torch.multiply(torch.tanh(F.softplus(x)), x)", "return x"], "mish"),
        ([], ["x = torch.mean(x, dim=(2, 3), keepdim=True)", "return x.mean(dim=1)"], "globalavgpool-mean"),
        (
            [],
            [
                "b, c, h, w = x.shape",
                "x = x.view(b, c, -1)",
                "x = torch.softmax(x, dim=2)",
                "return x.view(b, c, h, w)",
            ],
            "softmax",
        ),
        (
            [],
            ["x = torch.max(x, dim=1)[0]", "return torch.min(x, torch.tensor(0.5, device=x.device))"],
            "max-min",
        ),
        (
            [],
            ["residual = x.clone().detach()", "x = torch.sigmoid(x)", "x += residual", "return x"],
            "sigmoid-add",
        ),
    ],
)
def test_forward_calls_map_onto_the_vocabulary_in_data_flow_order(init, forward, expected):
    assert key(problem(init, forward)) == expected


@pytest.mark.parametrize(
    "forward, why",
    [
        (["if x.sum() > 0:", "    x = x + 1", "return x"], "a branch (if)"),
        (["for _ in range(2):", "    x = torch.relu(x)", "return x"], "a loop (for)"),
        (["return [torch.relu(t) for t in x]"], "a comprehension"),
        (["return helper(x)"], "calls helper on the data"),
        (["return self.other(x)"], "calls self.other (another method of Model)"),
        (["x[:, 0] = 0", "return x"], "an in-place write"),
        (["return x if x.numel() else x + 1"], "a conditional expression"),
    ],
)
def test_what_the_reading_does_not_follow_is_said(forward, why):
    source = problem([], forward).replace(
        "    def forward", "    def other(self, x):\n        return x\n\n    def forward"
    )
    reading = read_forward(source)
    assert reading.ops == () and why in reading.unhandled
    assert read_forward("x = (").unhandled.startswith("does not parse")
    assert read_forward("import torch\n").unhandled == "no Model.forward"


def test_real_kernelbench_forwards_read(kernelbench: Path):
    sequences = load_kernelbench(kernelbench, levels=(1, 2))
    unread = "\n".join(f"{file}: {why}" for file, why in sequences.unread)
    assert sequences.forwards_read >= 0.9 * (sequences.forwards_read + len(sequences.unread)), unread
    # names that lie: "Sum" is a bias add, "BMM" is an nn.Linear, "Clamp_Min" is one clamp
    level2 = kernelbench / "level2"
    assert key((level2 / "37_Matmul_Swish_Sum_GroupNorm.py").read_text()) == "gemm-swish-add-groupnorm"
    assert key((level2 / "28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py").read_text()).startswith("gemm-")
    assert (
        key((level2 / "100_ConvTranspose3d_Clamp_Min_Divide.py").read_text())
        == "convtranspose3d-clamp-divide"
    )


# --- the generator's dedupe ----------------------------------------------------------------------------


def test_a_misnamed_problem_is_deduplicated_by_its_forward(tmp_path: Path):
    assert draw_task(0, 15).ops == ("Conv2d", "Swish", "HardSwish")
    assert draw_task(0, 4).ops == ("Matmul", "LogSumExp", "BiasAdd")
    root = _fake_kernelbench(tmp_path / "kb", [MISNAMED, NAME_ONLY])
    sequences = load_kernelbench(root)
    assert draw_task(0, 15).key in sequences.forward_code and draw_task(0, 15).key not in sequences.file_name
    assert sequences.sources(draw_task(0, 4).key) == ("file_name",)

    result = generate_set(GenerateOptions(n=20, seed=0, validate=False, kernelbench=str(root)))
    attempts = {t.attempt for t in result["tasks"]}
    assert 15 not in attempts and 4 not in attempts and {3, 5, 14, 16} <= attempts
    rejected = result["dedupe_report"]["rejected"]
    assert rejected["forward_code"] == rejected["forward_code_only"] == 1
    assert rejected["file_name"] == rejected["file_name_only"] == 1
    # without the file, both draws are kept: the dedupe, not chance, removed them
    alone = generate_set(GenerateOptions(n=20, seed=0, validate=False, kernelbench=str(tmp_path)))
    assert {4, 15} <= {t.attempt for t in alone["tasks"]}


def test_manifest_and_output_count_each_source(tmp_path: Path, capsys):
    root = _fake_kernelbench(
        tmp_path / "kb", [MISNAMED, NAME_ONLY, ("5_Loop", problem([], ["while True:", "    pass"]))]
    )
    argv = ["tasks", "generate", "--n", "20", "--seed", "0", "--no-validate", "--kernelbench", str(root)]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr().out
    assert "1 forward_code, 1 file_name, 1 forward_code_only, 1 file_name_only" in printed
    record = json.loads((tmp_path / "a" / MANIFEST_FILE).read_text())["kernelbench_dedupe"]
    assert record["forwards_read"] == 2 and record["forward_code_sequences"] == 2
    assert record["forwards_unread"] == [{"file": "level2/5_Loop.py", "why": "a loop (while)"}]
    assert record["rejected"]["forward_code"] == 1 and record["rejected"]["file_name"] == 1
    # still byte-identical per seed with both sources in play
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    for path in sorted((tmp_path / "a").iterdir()):
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes(), path.name
