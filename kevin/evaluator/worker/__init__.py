"""The sandboxed worker: one candidate against one problem, in a process of its own.

One module per stage: `harness` (bookkeeping, the run's order, the device), `trials` (inputs and
the correctness run), `timed` (timing the candidate), `reference` (the reference model and the
comparison), `baseline` (timing the reference), `support` (shared helpers), `__main__` (the entry).

Started by `kevin.evaluator.sandbox` as `python -m kevin.evaluator.worker JOB_JSON CHANNEL_FD`; never imported by the
grader. It reports over the private channel (a pipe inherited as CHANNEL_FD, moved and authenticated
by kevin.evaluator.confine): `stage` events as it moves on (the parent enforces a deadline per stage) and one
`result` object at the end, then waits for the parent to kill it and everything below it. Whatever
the candidate prints goes to the captured log, never to the channel. Before anything else it
confines itself (kevin.evaluator.confine: writes only to the job directory and the build cache, a child
subreaper) and fixes torch's CPU thread count (recorded in `checks.cpu_threads`).

Order of work, chosen so the candidate never shares the process with the reference model:

  1. Load the problem in a throwaway namespace; draw every trial's inputs from the secret seed
     (on the device); keep the init inputs; drop the problem module and collect it.
  2. compile:      import the candidate in a fresh module (its `load_inline` builds run here,
                   through kevin.evaluator.build's cache); it must define `ModelNew`.
  3. wait_gpu:     take the device's lock (the GPU's, or the CPU's for the cpp back end), so
                   running and timing never overlap another worker's on the same device.
  4. correctness:  same weight seed, build `ModelNew`; run it on a clone of each trial's inputs;
                   check the inputs were not mutated; keep its outputs.
  5. timing:       time `ModelNew` with kevin.evaluator.timing (a fresh draw of the inputs per call; outputs
                   of two timed calls kept for checking). Then the candidate is dropped, and any
                   process it left below the worker is killed and fails it (`left_processes`).
  6. reference:    check that torch, the clocks and kevin's own functions are the ones bound before
                   the candidate was imported and that no torch mode is left entered (`tampering`);
                   only now load the problem again and build `Model` (same weight seed); compute
                   the expected outputs for every trial and for the kept timed calls; compare.
  7. baseline:     time `Model` with the same function (skipped when the parent has it cached),
                   optionally `torch.compile(Model)`.

Not protected here (see kevin.gate and the evaluator for what is): the candidate shares this
process with the harness, so code that walks frames or the heap, or patches C-level functions,
could interfere with comparison or timing, or find the channel token. The evaluator's dynamic
checks and the static gate are the defence against those; this module keeps the door narrow
(functions bound before the candidate is imported and their identities re-checked, reference
absent while the candidate runs, global flags and thread counts compared, inputs cloned and
checked, timed inputs freshly drawn).
"""
