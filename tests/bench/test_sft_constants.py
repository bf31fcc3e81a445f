"""bench/sft_constants.py's arguments: the learning run's corpus by default, the device and the
constant draws passed on, bad values refused with a one-line message and exit code 2."""

from __future__ import annotations

import pytest
from bench_scripts import load_script

from kevin.train import corpus as corpora

bench = load_script("sft_constants_bench", "sft_constants.py")


def test_defaults_are_the_learning_runs_corpus_on_the_cpu():
    args = bench.parse_args(["--out", "x"])
    assert (args.device, args.constant_draws, args.weights) == ("cpu", corpora.CONSTANT_DRAWS, [1.0, 8.0])


def test_the_gpu_probe_of_the_notes_parses():
    args = bench.parse_args(
        ["--out", "x", "--device", "cuda", "--steps", "3200", "--layers", "8", "--hidden", "512",
         "--weights", "1", "--constant-draws", "5"]
    )
    assert (args.device, args.steps, args.constant_draws, args.weights) == ("cuda", 3200, 5, [1.0])


@pytest.mark.parametrize("bad", [["--constant-draws", "0"], ["--weights", "0"], ["--device", "tpu"]])
def test_bad_values_exit_2(bad, capsys):
    with pytest.raises(SystemExit) as exited:
        bench.parse_args(["--out", "x", *bad])
    assert exited.value.code == 2
    assert "error" in capsys.readouterr().err
