"""The RL layer: the multi-turn environment around the evaluator, and the credit math.

Job: build each turn's prompt (task, instructions, earlier attempts with their feedback), parse the
policy's text into a candidate, run episodes (N parallel trajectories x T refinement turns) against
an `Evaluator`, turn verdicts into scores, discounted returns and group advantages, write episodes
to JSONL and compute the paper's metrics from them.

Public names: `kevin.rl.env` (`Policy`, `StreamingPolicy`, `Evaluator`, `Sampling`, `Generation`,
`EpisodeConfig`, `Turn`, `Trajectory`, `run_episodes`, `continue_episodes`, `stream_completions`,
`in_prompt_order`, `assign_credit`), `kevin.rl.reward` (`kernel_score`, `score_result`, `discounted_returns`,
`group_advantages`, `credit`), `kevin.rl.prompts`, `kevin.rl.candidate` (`parse_completion`),
`kevin.rl.episodes` (`write_episodes`, `read_episodes`), `kevin.rl.metrics` (`kevin metrics`),
`kevin.rl.replay` (`ReplayPolicy`, `read_records`: recorded completions as a policy),
`kevin.rl.profiles` (`with_profiles`: a profile summary in a passed kernel's feedback).

Layer rules: imports kevin.evaluator (the result contract and the evaluation entry points),
kevin.tasks and kevin.errors; never kevin.train, kevin.search or kevin.cli. It does not tokenize,
generate text or update weights: that is kevin.train's job.
"""
