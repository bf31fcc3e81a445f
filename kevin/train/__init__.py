"""The training layer: multi-turn GRPO on the policy, after the Kevin paper (DESIGN.md §3).

Job: turn episodes (kevin.rl) into weight updates. Sample completions with a policy back end,
score them through the evaluator, split every turn into its own sample, compute the clipped
policy-gradient loss, step the optimiser, checkpoint and log; `kevin train` runs it all.

Modules, in the order a step uses them:

    config        typed frozen config: one dataclass per part of the run, validated
    presets       smoke(), h200(), paper()
    overrides     dotted command-line overrides, config.json, what a resume may change
    model         the policy model and tokenizer (a tiny one built offline), TextCodec, LoRA
    sampled       SampledGeneration: a Generation with token ids and sampler log-probs
    policy_hf     Policy on transformers generate (the learner's own weights)
    policy_http   Policy on an OpenAI-compatible server (vLLM, SGLang), weight push
    rollout       task sampler (even across levels), evaluator dedupe, timing, evaluator builder
    packing       per-turn samples, mini-batches, rank partition, micro-batches by token budget
    logprobs      per-token log-probs under the learner, sampler agreement check
    grpo          the loss: clipped surrogate with clip-higher, KL (k3), length normalisations
    learner       AdamW, warm-up schedule, N gradient steps per batch, gradient clipping
    distributed   torch.distributed + FSDP2, rank-0-led rollouts
    checkpoint    exact-resume checkpoints, weight export for a server
    monitors      rollout health and the collapse rules
    tracking      metrics.jsonl, tensorboard, wandb
    plot          curves.png
    launch        one launch: setup from config (and resume), teardown
    loop          the training loop: steps, held-out evaluation, checkpoints, the step line
    cli           `kevin train`

The warm start of the learning run (issue #16), before `kevin train`:

    family        a generated family of small tasks with a held-out split; `kevin family`
    kernels       every way kevin writes a family task in CUDA or C++ (honest, slow, wrong)
    corpus        (turn-1 prompt, completion) samples from those kernels
    sft           tokenizer + tiny model trained from scratch on the corpus; `kevin sft`

Public names: `kevin.train.config.TrainConfig`, `kevin.train.presets`, `kevin.train.loop.train`,
`kevin.train.grpo` (the loss), `kevin.train.learner.Learner`, `HFPolicy`, `HTTPPolicy`.

Layer rules: imports kevin.rl, kevin.evaluator, kevin.gate, kevin.tasks and kevin.errors; nothing
below imports kevin.train. transformers, peft, tokenizers, tensorboard, wandb and matplotlib are
imported inside the functions that use them, so `import kevin.train` needs torch alone.
"""
