"""The evaluator layer: the reward. One candidate against one task -> a typed `EvalResult`.

Job: run the static gate, then build, check and time a candidate in a confined worker process of
its own, compare it with the reference, time the eager baseline, and say who failed when something
does (policy, candidate or our infrastructure). Also the ways to run many: the in-process
`EvaluationService`, the Ray service and `kevin eval-batch`.

Public names: `evaluate(task, source, config) -> EvalResult` and `EvalConfig`
(kevin.evaluator.evaluate), `EvalResult` (kevin.evaluator.result), `EvaluationService`
(kevin.evaluator.service), `RayEvaluationService` (kevin.evaluator.ray_service, needs `.[ray]`).
Import them from their modules: this package's import stays free of torch.

Modules: `result` (the contract), `evaluate` (config, flow, result assembly, baseline cache),
`commands` (`kevin eval` and the shared options), `sandbox` (process, deadlines, kill), `spares`
(workers booted before their job), `worker`
(what runs inside the sandbox, one module per stage), `confine` (the worker's self-confinement),
`devlock` (device admission and exclusive timing), `inputs` (trial inputs from a secret seed),
`compare`, `probes` (dynamic checks), `timing` (the one clock), `build` + `fastbuild` + `bindings` +
`native/` (load_inline behind a content-addressed cache, the light-header fast path), `broker` +
`torchbuild` (builds outside the runner; torch's own build in a throwaway process), `feedback` (the text the
model reads), `service`, `ray_service`, `batch` (`kevin eval-batch`), `profiling/` (`kevin profile`:
ncu or torch.profiler reduced to a few bounded lines; runs after a verdict, never inside one).

Layer rules: imports kevin.tasks, kevin.gate and kevin.errors; never kevin.rl, kevin.train,
kevin.search or kevin.cli (import-linter holds this, see pyproject.toml).
"""
