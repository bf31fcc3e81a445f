"""Profiler feedback: where a correct kernel spends its time, in a few lines a model can act on.

`kevin profile PROBLEM CANDIDATE` (and, when `EpisodeConfig.profile_feedback` is on, the feedback
of a passed kernel) runs the candidate's forward under Nsight Compute (`ncu`) where it is installed,
else under torch.profiler, and reduces the report to kernel count and time per kernel, achieved
DRAM bandwidth against peak, compute throughput, occupancy and its limiter, and the top stall
reasons, within a character budget. Profiling runs after the verdict, never inside the timed
region, and never changes a verdict.

Modules: `ncu` (ncu's command line and its raw-page CSV -> launches; pure), `summary` (launches
-> per-kernel statistics -> the bounded text; pure), `target` (the program the profiler watches:
loads problem and candidate, runs forward calls), `run` (`profile(...) -> ProfileReport`: the
child process, its deadline, the ncu -> torch.profiler fallback), `commands` (`kevin profile`).

Layer rules: part of kevin.evaluator (imports kevin.tasks and kevin.errors, never kevin.rl or
above). The target is not confined: see kevin.evaluator.profiling.run.
"""
