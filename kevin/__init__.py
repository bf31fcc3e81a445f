"""kevin: multi-turn RL for writing fast, correct GPU kernels.

The folder listing is the architecture, one subpackage per layer, each importing only the layers
below it (import-linter contracts in pyproject.toml hold this in CI):

    kevin.tasks      problems: records, loaders, selection, splits, validation, bundled problems
    kevin.gate       the static check of a candidate's source          (imports nothing of kevin)
    kevin.evaluator  the reward: sandboxed build, checks, timing, EvalResult, services, batch
    kevin.rl         prompts, candidate parsing, multi-turn episodes, credit, metrics
    kevin.train      the GRPO trainer: policies, loss, learner, loop
    kevin.search     a policy at test time: `kevin bench` (Table 1, by turn, resumable), compare
    kevin.cli        the `kevin` command (top); kevin.errors is shared by all

`kevin.service` and `kevin.ray_service` are kept as aliases of their kevin.evaluator modules.
Importing `kevin` is cheap: no module imports torch at import time unless its whole job needs it.
"""

__version__ = "0.1.0"
