"""Two processes on the CPU (gloo, FSDP2) against one: same loss, same weights (kevin.train.distributed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from distributed_worker import learn, model_and_learner
from train_helpers import tiny_tokenizer

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def test_two_gloo_processes_match_one_process(tmp_path):
    tokenizer_dir = tmp_path / "tokenizer"
    tiny_tokenizer().save_pretrained(str(tokenizer_dir))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
    }
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(HERE / "distributed_worker.py"),
        str(tokenizer_dir),
        str(tmp_path),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "report.json").is_file(), done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())

    from transformers import AutoTokenizer

    model, learner = model_and_learner(AutoTokenizer.from_pretrained(str(tokenizer_dir)))
    single = learn(learner)
    sharded = report["metrics"]
    assert sharded["gradient_steps"] == single["gradient_steps"] == 2
    assert sharded["samples_trained"] == single["samples_trained"] == 8  # the advantage-0 sample is skipped
    for key in ("loss", "grad_norm", "ratio_mean", "clip_low_frac", "clip_high_frac", "tokens"):
        assert sharded[key] == pytest.approx(single[key], rel=1e-4, abs=1e-6), key
    weights = torch.load(tmp_path / "fsdp_weights.pt")
    for name, value in model.state_dict().items():
        assert torch.allclose(weights[name], value, atol=1e-5), name
    assert report["restored"], "an FSDP checkpoint did not load back to the same weights"
    assert len(report["generated"]) == 5 and all(1 <= n <= 4 for n in report["generated"])
    assert all(report["prompts_match"])  # completions came back to the prompts they answer
    # streamed batch by batch: indices 0-3 after each rank's first batch, 4 after the second
    assert sorted(index for index, _ in report["streamed"]) == [0, 1, 2, 3, 4]
    assert [calls for _, calls in report["streamed"]] == [1, 1, 1, 1, 2], report["streamed"]
    # three streams of two batches on each rank, the abandoned one included
    assert report["calls"] == json.loads((tmp_path / "rank1.json").read_text())["calls"] == 6
