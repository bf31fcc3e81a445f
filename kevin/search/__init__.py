"""The search layer: using a policy at test time, and measuring it.

Job: run a policy over a task set with N parallel trajectories x T refinement turns through the real
evaluator, keep every turn, and report the paper's metrics (Table 1) overall and by turn; compare
two such runs (`kevin bench`). Optimize one user module (`kevin optimize`): the same trajectories and
turns, optionally a beam search (keep the top K trajectories by score after each turn, branch each
into N/K), the fastest passed kernel verified again on fresh inputs and other shapes, written as a
drop-in `ModelNew` with a report. The fixed-budget study (`kevin bench --study`): one kernel budget per
task spent as 16x8, 32x4, 128x1 and a beam, each a bench run, set side by side.

Modules:

    bench      `run_bench`: tasks x trajectories x turns (or a beam) into a run directory, resumable
    study      `run_study`: the fixed-budget study, one bench run per shape; study.json/md/png
    report     Table 1 from kevin.rl.metrics, markdown, the per-turn curves, run comparison
    rundir     config.json identity check and episodes.jsonl rows for resumable run directories
    beam       one task's search turn by turn: the beam (`select_parents`), resume from rows
    optimize   `run_optimize`: a module's search, re-verification, the drop-in and the files
    shapes     a problem re-parameterised by its module-level constants (`--verify-shapes`)
    attempts   an optimize run's attempts per turn and by failure: progress lines, report.md/png
    commands   `kevin bench`, `kevin bench compare` and `kevin optimize`

Layer rules: imports kevin.train (policy back ends), kevin.rl, kevin.evaluator, kevin.tasks and
kevin.errors; only kevin.cli imports it. matplotlib is imported inside the plot functions.
"""
