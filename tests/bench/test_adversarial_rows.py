"""bench/adversarial.py over several device calls: the lanes' rows are written as each candidate
finishes, and `--resume` keeps them. Session 30's H100 call ran the CUDA table's parallel phase for
545 s, was cut at its limit, and returned no row at all (the phase kept its rows until it was over).
The evaluations are stood in for by the rows that call's Triton table made."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import adversarial  # noqa: E402

ROWS = {
    row["candidate"]: row
    for row in map(json.loads, (REPO / "bench/results/h100/s30/call4/adversarial_triton_rows.jsonl").open())
}
CUT = "bundled_05_matmul"


class Cut(Exception):
    """The device call's limit, as a lane sees it."""


@pytest.fixture
def bench(monkeypatch):
    """main() with every evaluation replaced by its recorded row; `ran` lists what was evaluated."""
    state = {"ran": [], "cut": True, "leftover": []}  # leftover: what side_effects reads, call by call

    def run_entry(entry, runs, lock_dir, args, shared=False, **changes):
        state["ran"].append(entry.name)
        if entry.name == CUT and state["cut"]:
            raise Cut(entry.name)
        return {**ROWS[entry.name], "lane": shared}

    monkeypatch.setattr(adversarial, "run_entry", run_entry)
    monkeypatch.setattr(adversarial, "prebuild", lambda entries, cache, jobs: [])
    monkeypatch.setattr(adversarial, "clear_side_effects", lambda: None)
    monkeypatch.setattr(
        adversarial, "side_effects", lambda before, root: (state["leftover"] or [{}]).pop(0)
    )
    return state


def _main(tmp_path: Path, *more: str) -> int:
    argv = ["--backend", "triton", "--lanes", "3", "--no-cost", "--out", str(tmp_path)]
    argv += ["--cache", str(tmp_path / "c")]
    return adversarial.main([*argv, *more])


def test_a_phase_cut_short_keeps_the_rows_of_the_candidates_that_finished(bench, tmp_path):
    with pytest.raises(Cut):
        _main(tmp_path)
    kept = [json.loads(line)["candidate"] for line in (tmp_path / "adversarial_triton_lanes.jsonl").open()]
    assert CUT not in kept
    assert set(kept) == set(bench["ran"]) - {CUT} and len(kept) >= len(ROWS) - 3  # all but those it cut


def test_resume_runs_only_what_is_missing_and_reports_every_row(bench, tmp_path):
    with pytest.raises(Cut):
        _main(tmp_path)
    first = set(bench["ran"]) - {CUT}
    bench.update(ran=[], cut=False)
    assert _main(tmp_path, "--resume") == 0
    assert first.isdisjoint(bench["ran"]) and CUT in bench["ran"]
    report = json.loads((tmp_path / "adversarial_triton.json").read_text())
    assert [row["candidate"] for row in report["rows"]] == list(ROWS)  # every row, in corpus order
    resumed = {row["candidate"] for row in report["rows"] if row.get("side_effects_read") == "when resumed"}
    assert resumed == first
    assert "when the run was resumed" in (tmp_path / "adversarial_triton.md").read_text()
    assert (tmp_path / "adversarial_triton_lanes.jsonl").read_text() == ""
    rows = [json.loads(line)["candidate"] for line in (tmp_path / "adversarial_triton_rows.jsonl").open()]
    assert sorted(rows) == sorted(ROWS)


def test_rows_of_a_cut_phase_that_left_something_behind_are_made_again(bench, tmp_path):
    with pytest.raises(Cut):
        _main(tmp_path)
    bench.update(ran=[], cut=False, leftover=[{"daemons": ["kevin-adversarial-daemon"]}])  # read on resuming
    assert _main(tmp_path, "--resume") == 0
    assert sorted(bench["ran"]) == sorted(ROWS)  # nothing of the cut phase was kept
    report = json.loads((tmp_path / "adversarial_triton.json").read_text())
    assert not any(row.get("side_effects_read") for row in report["rows"])


def test_a_triton_candidate_prebuilds_from_a_file(tmp_path, monkeypatch):
    """Triton's @jit reads its function's source from the file it was defined in: the prebuild ran
    the bundled Triton candidates from stdin, and every one failed ("@jit functions should be defined
    in a Python file", session 30). A candidate that reads its own source stands in for it."""
    bundled = tmp_path / "bundled"
    (bundled / "triton").mkdir(parents=True)
    path = bundled / "triton" / "candidate.py"
    path.write_text("import inspect\n\n\ndef kernel():\n    pass\n\n\nassert inspect.getsource(kernel)\n")
    monkeypatch.setattr(adversarial, "BUNDLED", bundled)
    entry = adversarial.Entry(name="candidate", family="honest", problem="01", backend="triton", path=path)
    [line] = adversarial.prebuild([entry], tmp_path / "cache", 1)
    assert line.startswith("candidate: ok"), line


def test_a_cells_error_keeps_the_exception_after_what_the_error_says_before_its_traceback():
    timed = (
        "while timing:\nTraceback (most recent call last):\n  File \"runner.py\", line 9, in cycles\n"
        "    out = self.model(*buffers)\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64 MiB"
    )
    assert adversarial.headline(timed) == (
        "while timing: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64 MiB"
    )
    bare = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad shape"
    assert adversarial.headline(bare) == "ValueError: bad shape"
    assert adversarial.headline("wrong output on 1 of 4 trials\ndetails") == "wrong output on 1 of 4 trials"
    assert adversarial.headline("") == ""
    # s45: torch's CUDA error runs over four lines and ends in advice; the cell showed only the advice
    illegal = (
        "the candidate raised:\nTraceback (most recent call last):\n  File \"runner.py\", line 3, in trial\n"
        "    outputs = model(*inputs)\ntorch.AcceleratorError: CUDA error: an illegal memory access was "
        "encountered\nCUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    )
    assert adversarial.headline(illegal) == (
        "the candidate raised: torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    )
