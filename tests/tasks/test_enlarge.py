"""`kevin tasks enlarge` (#18 item 2) on the CPU: the size constant doubles until the reference passes
--min-ms, the variant validates, problems without a constant are reported, the memory cap stops it.

One CLI run (module fixture: a fake KernelBench of four tiny problems, real CPU timing, real
validation) keeps the suite fast; the rest runs a fake clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import pytest

from kevin.cli import main
from kevin.errors import UsageError
from kevin.tasks import load_tasks
from kevin.tasks.enlarge import (
    MANIFEST_FILE,
    EnlargeOptions,
    enlarge_problem,
    enlarge_set,
    leading_size_constant,
    write_enlarged,
)
from kevin.tasks.loaders import load_file
from kevin.tasks.probe import GIB
from kevin.tasks.scaling import MAX_DOUBLINGS
from kevin.tasks.sizes import int_constants

PROBLEM = '''"""A KernelBench-style problem for the enlarger's tests."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        return {forward}


{constants}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [{init}]
'''

ROWS = PROBLEM.format(
    forward="torch.tanh(x).sum(dim=1)",
    constants="batch_size = 1  # rows\ndim = 2048 * 2",
    inputs="torch.randn(batch_size, dim)",
    init="",
)
INLINE = PROBLEM.format(forward="torch.relu(x)", constants="", inputs="torch.randn(16, 32)", init="")
INIT_READS = PROBLEM.format(
    forward="torch.relu(x)",
    constants="batch_size = 2\ndim = 64",
    inputs="torch.randn(batch_size, dim)",
    init="batch_size",
)
DROPOUT = PROBLEM.format(
    forward="self.dropout(x)",
    constants="batch_size = 1\ndim = 4096",
    inputs="torch.randn(batch_size, dim)",
    init="",
)
FILES = {
    "level1/1_Tanh_Sum.py": ROWS,
    "level1/2_ReLU_inline.py": INLINE,
    "level2/3_ReLU_init_reads.py": INIT_READS,
    "level2/4_Dropout.py": DROPOUT,
}
MIN_MS = 0.3


def _fake_kernelbench(root: Path) -> Path:
    for relative, source in FILES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(source)
    return root


def _rows_ms(source: str, *, device: str) -> float:
    """A fake clock: 0.01 ms per batch row."""
    return 0.01 * int_constants(source)["batch_size"]


@pytest.fixture(scope="module")
def enlarged(tmp_path_factory) -> tuple[Path, Path, str]:
    """(KernelBench folder, --out folder, what the command printed) of one real CPU run."""
    root = _fake_kernelbench(tmp_path_factory.mktemp("kb"))
    out = tmp_path_factory.mktemp("enlarged") / "out"
    argv = ["tasks", "enlarge", "--levels", "1", "2", "--kernelbench", str(root), "--out", str(out)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([*argv, "--device", "cpu", "--min-ms", str(MIN_MS)]) == 0
    return root, out, printed.getvalue()


def _entries(out: Path) -> dict[str, dict]:
    return {e["id"]: e for e in json.loads((out / MANIFEST_FILE).read_text())["problems"]}


def test_the_size_constant_doubles_until_the_reference_passes_min_ms(enlarged):
    root, out, _ = enlarged
    entry = _entries(out)["L1_1"]
    assert entry["status"] == "enlarged" and entry["constant"] == "batch_size"
    before, after = entry["constants_before"]["batch_size"], entry["constants_after"]["batch_size"]
    assert before == 1 and after > 1 and after & (after - 1) == 0  # a power of two: doubled
    sizes = [size for size, _ in entry["measured"]]
    assert sizes == [1 << i for i in range(len(sizes))] and sizes[-1] == after
    assert entry["original_ms"] <= MIN_MS < entry["reference_ms"] == entry["measured"][-1][1]
    written = out / entry["written"]
    assert entry["written"] == "level1/1_Tanh_Sum_large.py"
    # only the constant's value changed: every other byte (its comment too) is the original's
    original, variant = ROWS.splitlines(), written.read_text().splitlines()
    changed = [(a, b) for a, b in zip(original, variant) if a != b]
    assert len(original) == len(variant) and changed == [
        ("batch_size = 1  # rows", f"batch_size = {after}  # rows")
    ]
    task = load_file(written)
    assert task.id == "L1_1" and task.name == "Tanh_Sum_large"


def test_every_written_variant_validated_and_a_failing_one_is_not_written(enlarged):
    _, out, _ = enlarged
    data = json.loads((out / MANIFEST_FILE).read_text())
    assert data["validated"] and data["device"] == "cpu" and data["min_ms"] == MIN_MS
    assert not (out / ".enlarge_journal.jsonl").exists(), "a finished run keeps no journal"
    dropout = _entries(out)["L2_4"]
    assert dropout["status"] == "invalid" and dropout["reason"].startswith("nondeterministic")
    assert dropout["written"] is None and dropout["constants_after"]["batch_size"] > 1
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.py")) == ["level1/1_Tanh_Sum_large.py"]
    assert data["counts"] == {
        "enlarged": 1,
        "fast_enough": 0,
        "not_enlargeable": 2,
        "capped": 0,
        "error": 0,
        "not_reached": 0,
        "invalid": 1,
    }


def test_problems_without_a_size_constant_are_reported_not_skipped(enlarged):
    _, out, printed = enlarged
    entries = _entries(out)
    assert (
        entries["L1_2"]["status"] == "not_enlargeable"
        and "leading dimension is 16" in entries["L1_2"]["reason"]
    )
    assert entries["L2_3"]["status"] == "not_enlargeable"
    assert "also read by get_init_inputs" in entries["L2_3"]["reason"]
    assert "L1_2    not_enlargeable" in printed and "L2_3    not_enlargeable" in printed
    assert "1 enlarged, 2 not_enlargeable, 1 invalid (4 problems)" in printed


def test_the_memory_cap_stops_doubling(tmp_path: Path):
    task = load_file(_fake_kernelbench(tmp_path) / "level1/1_Tanh_Sum.py")
    # batch b holds b * 4096 input floats + b output floats: 2 rows fit in 40,000 bytes, 4 do not
    options = EnlargeOptions(min_ms=1e6, budget_gib=40_000 / GIB)
    outcome = enlarge_problem(task, options, measure=_rows_ms)
    assert outcome.status == "capped" and "batch_size=4 would need" in outcome.reason
    assert [size for size, _ in outcome.measured] == [1, 2] and outcome.constants_after == {"batch_size": 2}
    assert outcome.source == ""  # below min_ms: nothing to write


def test_result_is_deterministic(tmp_path: Path):
    tasks = load_tasks(str(_fake_kernelbench(tmp_path / "kb")), level=(1, 2))
    options = EnlargeOptions(min_ms=0.1, validate=False)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        write_enlarged(tmp_path / name, enlarge_set(tasks, options, measure=_rows_ms), options)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert [str(f) for f in files] == [
        "level1/1_Tanh_Sum_large.py",
        "level2/4_Dropout_large.py",
        MANIFEST_FILE,
    ]
    for relative in files:
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes(), relative
    assert (
        "batch_size = 16  # rows" in (tmp_path / "a/level1/1_Tanh_Sum_large.py").read_text()
    )  # 0.16 ms > 0.1


@pytest.mark.parametrize(
    "measure, status, reason",
    [
        (lambda source, device: 5.0, "fast_enough", "already above 0.1 ms"),
        (lambda source, device: 0.001, "not_reached", f"after {MAX_DOUBLINGS} doublings"),
        (lambda source, device: 1 / 0, "error", "batch_size=1: ZeroDivisionError"),
    ],
)
def test_what_stops_the_doubling_is_the_status(tmp_path: Path, measure, status, reason):
    task = load_file(_fake_kernelbench(tmp_path) / "level1/1_Tanh_Sum.py")
    outcome = enlarge_problem(task, EnlargeOptions(min_ms=0.1, budget_gib=64), measure=measure)
    assert outcome.status == status and reason in outcome.reason and outcome.source == ""


def test_the_leading_dimension_is_the_first_non_scalar_input():
    assert leading_size_constant(ROWS) == ("batch_size", 1)
    two_inputs = ROWS.replace(
        "torch.randn(batch_size, dim)", "torch.rand(()), torch.randn((dim, batch_size))"
    )
    assert leading_size_constant(two_inputs) == ("dim", 4096)  # 2048 * 2, evaluated


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--min-ms", "0"], "--min-ms must be positive"),
        (["--levels", "3"], "no level3 folder"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys, extra, message):
    root = _fake_kernelbench(tmp_path / "kb")
    assert main(["tasks", "enlarge", "--kernelbench", str(root), "--out", str(tmp_path / "out"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_refuses_a_folder_that_holds_problems(tmp_path: Path, capsys):
    root = _fake_kernelbench(tmp_path / "kb")
    assert main(["tasks", "enlarge", "--kernelbench", str(root), "--out", str(root)]) == 2
    assert "already holds problem files" in capsys.readouterr().err


def test_a_cut_enlargement_goes_on_from_its_journal(tmp_path: Path, monkeypatch):
    """Each problem's outcome and validation is journaled as it is known (s33: a cut GPU run kept
    nothing); a rerun measures and validates none of them again and writes the same variants."""
    from kevin.tasks import enlarge
    from kevin.tasks.validate import ValidationResult

    tasks = load_tasks(str(_fake_kernelbench(tmp_path / "kb")), level=(1, 2))
    measured, validated, cut = [], [], {"measure_after": None}

    def clock(source: str, *, device: str) -> float:
        if cut["measure_after"] is not None and len(measured) == cut["measure_after"]:
            raise KeyboardInterrupt
        measured.append(source)
        return _rows_ms(source, device=device)

    def fake_validate(records, settings, *, jobs, progress):  # level 2's variant is nondeterministic
        for i, record in enumerate(records):
            validated.append(record.id)
            status = "nondeterministic" if record.id.startswith("L2") else "ok"
            progress(i + 1, len(records), ValidationResult(record.id, 0, record.name, status, "planted", 0.1, None))

    monkeypatch.setattr(enlarge.validate, "validate_tasks", fake_validate)

    def run(out: Path) -> list:
        options = EnlargeOptions(min_ms=0.1, journal=str(out / enlarge.JOURNAL_FILE))
        return write_enlarged(out, enlarge_set(tasks, options, measure=clock), options)

    (tmp_path / "whole").mkdir()
    whole = run(tmp_path / "whole")
    all_measured, all_validated = len(measured), len(validated)
    assert all_validated == 2 and [o.status for o in whole].count("invalid") == 1
    measured.clear(), validated.clear()
    cut.update(measure_after=all_measured - 1)  # the last problem's last measurement
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "parts")
    cut.update(measure_after=None)
    measured.clear()
    parts = run(tmp_path / "parts")
    assert 0 < len(measured) < all_measured and len(validated) == all_validated  # only the rest again
    assert parts == whole
    for name in ("level1/1_Tanh_Sum_large.py", MANIFEST_FILE):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "parts" / name).read_bytes(), name
    measured.clear(), validated.clear()
    again = EnlargeOptions(min_ms=0.1, journal=str(tmp_path / "parts" / enlarge.JOURNAL_FILE))
    assert enlarge_set(tasks, again, measure=clock) == [dataclasses.replace(o, written=None) for o in parts]
    assert measured == [] and validated == []  # validations come back from the journal too
    with pytest.raises(UsageError, match="min_ms 0.1 there, 0.2 now"):
        enlarge_set(tasks, EnlargeOptions(min_ms=0.2, journal=str(tmp_path / "parts" / enlarge.JOURNAL_FILE)))
