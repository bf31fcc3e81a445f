"""The worker: one candidate against one problem, judged by a process that never runs its code.

Two processes per evaluation (DESIGN.md §4, "the judge never shares a process with candidate code"):

  judge   `python -m kevin.evaluator.worker JOB_FD CHANNEL_FD`, started by kevin.evaluator.sandbox.
          The job (secret seed, channel token) arrives on a pipe, never in a file. It loads the
          problem, builds the reference, draws every input, compares every output, times with its
          own clock, and reports over the private channel to the supervisor (`stage` events, then
          one `result`). It never imports the candidate.
  runner  `python -m kevin.evaluator.worker.runner`, started by the judge in a PID namespace of
          its own (kevin.evaluator.spawn.spawn_confined) and confined before the candidate
          exists (seccomp, Landlock reads and writes). The only process that loads candidate code.
          It runs what the judge asks on inputs drawn from seeds the judge reveals one call at a
          time, and hands outputs back through shared memory (kevin.evaluator.worker.exchange).
          Everything it says is data the judge checks; it has no channel to the supervisor.

Order of work (the judge's side; one module per stage):

  setup        load the problem, the reference model and the init inputs (`harness`); start the
               runner and have it load the problem for get_inputs (`handle`, `runner`).
  calibrate    with the runner still clean, time cycles without a call (beside other workers'
               shared device work, admitted for its moment: `device`): the cycle's own overhead and
               the fetch time of an output-sized buffer, for comparison with the bracket's (`timed`).
  compile      the runner imports the candidate (its builds go through the build cache) and builds
               `ModelNew` from the weight seed.
  correctness  per trial: the judge draws the inputs and the reference's outputs, the runner draws
               the same inputs from the same seed and runs the candidate; the judge reads the
               outputs and compares (`trials`), then asks for one profiled call (library share).
  timing       exclusive on the device: cycles clocked by the judge, a few sampled outputs fetched
               (`timed`; on the GPU the judge and the runners spin on two cores of the device's
               own, at a raised priority), between two short runs of overhead cycles in a second, clean runner
               started with the first (the overhead taken off is measured at the time of the
               calls); the runner's OS threads counted from /proc; the runner and everything it
               started are killed (`left_processes` if it started any).
  reference    the sampled timed outputs against the reference on their own seeds (`reference`).
  baseline     from the parent's cache, else timed in the clean runner (it never loads a
               candidate), by the same cycles and clock, bracketed by its own overhead cycles
               (`baseline`).

What this does not protect against, and where it is handled: a candidate can make its own outputs
and its own timing whatever it likes; the judge checks the first and measures the second itself.
The dynamic checks that look inside the candidate's process (the profiler trace, output oddities)
are reported by the runner and so are only as honest as that process; they can add flags, never
remove them. A runner that computes an output only when it is fetched is caught only when the hidden
work exceeds the fetch-time floor (`fetchcheck.FETCH_FLOOR_MS`).
"""
