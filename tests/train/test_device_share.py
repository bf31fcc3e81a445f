"""The trainer's device work and kevin's timing never overlap on one GPU (EvaluatorConfig.share_device).

Session 22's H200 learning run: the trainer generated and learned on the GPU its local evaluator
timed on, outside the device lock, and the timed cycles took ~8 ms where they take 0.2-0.5 ms (a
reference timed at 7.7 ms for 0.2 ms of work, rewards of 50-80x; overhead brackets of 8 ms, honest
kernels timed at 0). These tests hold the trainer to the lock: its generation batches and gradient
steps run inside the shared side of the evaluator's own lock file, so an exclusive timing waits for
them (and they for it), and nothing of the trainer's waits for a verdict inside one.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from train_helpers import FakeEvaluator, RewritingPolicy, tasks, tiny_config, verdict

from kevin.evaluator import devlock
from kevin.evaluator import evaluate as evaluate_module
from kevin.train import launch
from kevin.train.config import EvaluatorConfig
from kevin.train.launch import default_policy
from kevin.train.loop import train
from kevin.train.rollout import eval_config_for, trainer_device_section

CUDA0 = torch.device("cuda", 0)


@pytest.fixture
def lock_path(tmp_path, monkeypatch):
    """The evaluator's lock file for a config, moved into tmp_path (and the configs it was asked for)."""
    asked = []

    def path_for(config):
        asked.append(config)
        return tmp_path / f"kevin-cuda{config.device_index}.lock"

    monkeypatch.setattr(evaluate_module, "device_lock_path", path_for)
    path_for.asked = asked
    return path_for


@pytest.mark.parametrize(
    ("config", "backend", "device"),
    [
        (EvaluatorConfig(), "cpp", torch.device("cpu")),  # a CPU back end: no GPU to share
        (EvaluatorConfig(), "cuda", torch.device("cpu")),  # the trainer on the CPU
        (EvaluatorConfig(kind="ray"), "cuda", CUDA0),  # Ray's evaluators run on their own devices
        (EvaluatorConfig(share_device=False), "cuda", CUDA0),  # asked not to
        (EvaluatorConfig(device_indices=(1, 2)), "cuda", CUDA0),  # the service evaluates elsewhere
    ],
)
def test_no_section_where_the_trainer_and_the_timing_cannot_meet(config, backend, device, lock_path):
    assert trainer_device_section(config, backend, device) is None
    assert lock_path.asked == []


def test_a_trainer_on_an_evaluated_gpu_takes_the_shared_side_of_that_gpus_own_lock(lock_path):
    config = EvaluatorConfig(device_indices=(0, 1))
    section = trainer_device_section(config, "triton", torch.device("cuda", 1))
    assert section is not None
    (asked,) = lock_path.asked
    # The very file the service's workers lock for device 1 (their EvalConfig, with that device).
    assert asked.device_index == 1 and asked.backend == "triton"
    assert asked.lock_dir == eval_config_for(config, "triton").lock_dir
    timer = devlock.DeviceLock(lock_path(asked), asked.device_slots)
    timed = threading.Event()

    def time_a_candidate():
        with timer.exclusive():
            timed.set()

    with section():
        thread = threading.Thread(target=time_a_candidate)
        thread.start()
        time.sleep(0.3)
        assert not timed.is_set()  # the timing waits for the trainer's section to end
    thread.join(timeout=5)
    assert timed.is_set()
    with timer.shared():  # the evaluator's shared work (trials) goes on beside the trainer's
        with section():
            pass


def test_a_section_gives_back_the_allocators_cache_before_it_lets_go_of_the_lock(lock_path, monkeypatch):
    """The trainer's cached blocks are the workers' memory next (kevin.evaluator.devmem): a section
    empties torch's cache on the way out, while it still keeps timings off the device."""
    section = trainer_device_section(EvaluatorConfig(), "cuda", CUDA0)
    (asked,) = lock_path.asked
    emptied = []
    monkeypatch.setattr(
        torch.cuda, "empty_cache", lambda: emptied.append(not devlock.held(lock_path(asked)))
    )
    with section():
        assert emptied == []
    assert emptied == [False]
    with pytest.raises(RuntimeError), section():  # and when the section's work fails
        raise RuntimeError("out of memory in a gradient step")
    assert emptied == [False, False]


class Recorder:
    """A device section that counts its entries and says whether it is held."""

    def __init__(self) -> None:
        self.entered = 0
        self.held = False

    def __call__(self):
        recorder = self

        class Section:
            def __enter__(self):
                assert not recorder.held, "sections do not nest"
                recorder.entered += 1
                recorder.held = True

            def __exit__(self, *exc):
                recorder.held = False

        return Section()


def test_generation_batches_and_gradient_steps_run_inside_the_section_and_verdicts_outside(tmp_path, monkeypatch):
    recorder = Recorder()
    monkeypatch.setattr(launch, "trainer_device_section", lambda config, backend, device: recorder)
    learned_inside = []
    original_learn = launch.Learner.learn

    def learn(self, *args, **kwargs):
        learned_inside.append(recorder.held)
        return original_learn(self, *args, **kwargs)

    monkeypatch.setattr(launch.Learner, "learn", learn)

    def judge(task, source):
        assert not recorder.held, "a verdict was awaited inside the trainer's device section"
        return verdict(task, source)

    config = tiny_config(loop={"steps": 2}, rollout={"generation_batch_size": 2})
    lines = []
    result = train(
        config,
        tmp_path / "run",
        tasks=tasks(),
        policy_factory=lambda r: RewritingPolicy(default_policy(r)),
        evaluator_factory=lambda r: FakeEvaluator(judge),
        out=lines.append,
    )
    assert "kevin train: generation and updates on cpu take the evaluator's device lock (shared)" in lines
    assert result.last_step == 2
    assert learned_inside == [True, True]  # each step's update
    # generation: every batch of every turn of both steps (2 prompts a batch), plus the two updates
    episodes = config.rollout.tasks_per_step * config.rollout.trajectories * config.rollout.turns * 2
    assert recorder.entered == 2 + episodes // 2
    assert not recorder.held
