"""Inputs and correctness: draw every trial's inputs from the secret seed, run ModelNew on clones.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness)."""

from __future__ import annotations

import threading
from typing import Any

from kevin.evaluator import inputs as trial_inputs
from kevin.evaluator import probes
from kevin.evaluator.timing import Timer, TimingConfig
from kevin.evaluator.worker.support import (
    Failure,
    cast_floating,
    flatten_outputs,
    forget_module,
    load_module,
    short_exception,
)


class TrialsStage:
    def draw_inputs(self) -> tuple[list[list[Any]], Any]:
        # Inputs are drawn only now, under the device's lock (GPU memory is not held by workers
        # that are still building), and only if the candidate's import left torch as it found it:
        # a patched torch.rand could otherwise hand the candidate inputs of its choosing.
        job = self.job
        self.tamper_check("at import")
        if threading.active_count() > self.threads_before:
            raise Failure("runtime", "the candidate started threads at import", flags=["extra_threads"])
        self.timer = Timer(self.device, TimingConfig(**job["timing"]))
        try:
            problem = load_module(job["problem_source"], "kevin_problem_inputs", "<problem>")
            trials = trial_inputs.draw_trials(
                problem,
                job["seed"],
                job["trials"],
                job.get("distribution_trials", 0),
                self.device,
                self.dtype,
            )
            fresh = trial_inputs.FreshInputs(problem, self.device, self.dtype)
        except BaseException as exc:
            raise Failure(
                "runtime",
                "the reference problem failed to make inputs:\n" + short_exception(exc),
                blame="infrastructure",
            ) from None
        del problem
        forget_module("kevin_problem_inputs")
        return trials, fresh

    def run_trials(
        self, model_class: type, init_inputs: list[Any], trials: list[list[Any]]
    ) -> tuple[Any, list]:
        torch = self.torch
        try:
            torch.manual_seed(self.job["weight_seed"])
            model_new = model_class(*init_inputs).to(self.device)
            model_new = cast_floating(model_new, self.dtype)
            outputs = []
            for t, inputs in enumerate(trials):
                args = self.clone_args(inputs)
                out = model_new(*args)
                self.sync()
                if t == 0:
                    self.flags.extend(probes.output_flags(flatten_outputs(out), self.sync))
                if not all(
                    self.equal(a, b) for a, b in zip(args, inputs, strict=True) if isinstance(a, torch.Tensor)
                ):
                    self.flags.append("inputs_mutated")
                outputs.append([self._detach(o) for o in flatten_outputs(out)])
            self.trace = probes.trace_forward(
                lambda: model_new(*self.clone_args(trials[0])),
                self.is_cuda,
                self.sync,
                self.build_log.modules,
            )
            self.flags.extend(self.trace.pop("flags"))
        except BaseException as exc:
            raise Failure("runtime", short_exception(exc)) from None
        return model_new, outputs

