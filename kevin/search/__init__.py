"""The search layer: using a policy at test time, and measuring it.

Job: run a policy over a task set with N parallel trajectories x T refinement turns through the real
evaluator, keep every turn, and report the paper's metrics (Table 1) overall and by turn; compare
two such runs. Test-time search (beam search, fixed-budget studies such as 16x8 vs 32x4 vs 128x1)
belongs here too and is not built yet.

Modules:

    bench      `run_bench`: tasks x trajectories x turns into a run directory, resumable
    report     Table 1 from kevin.rl.metrics, markdown, the per-turn curves, run comparison
    commands   `kevin bench` and `kevin bench compare`

Layer rules: imports kevin.train (policy back ends), kevin.rl, kevin.evaluator, kevin.tasks and
kevin.errors; only kevin.cli imports it. matplotlib is imported inside the plot function.
"""
