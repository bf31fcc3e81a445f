"""`kevin bench`, `kevin bench compare` and `kevin optimize`.

    kevin bench POLICY [--out DIR] [--trajectories N] [--turns T] [--beam K] [task selection]
                [--split paper|seeded|FILE [--part]] [evaluation options]
    kevin bench POLICY --study BUDGET [--shapes 16x8,32x4,128x1,16x8-beam4] [--out DIR] [as above]
    kevin bench compare RUN_A RUN_B [--out FILE]        (two bench runs, or two studies)
    kevin optimize MODULE.py POLICY [--trajectories N] [--turns T] [--beam K]
                [--verify-shapes NAME=VALUE[,...]]... [--out DIR] [evaluation options]

    POLICY: --replay RECORDS | --base-url URL --model NAME [--api-key-env VAR] | --hf MODEL_DIR

The policy is a replay of recorded completions (kevin.rl.replay), a model behind an
OpenAI-compatible server (kevin.train.policy_http; the key is read from the environment variable
named by --api-key-env, never from a flag), or a transformers model sampled in this process
(kevin.train.policy_hf). Tasks: the shared selection options (bundled tasks by default), optionally
one part of a split as `kevin train` makes it; `kevin optimize` takes one KernelBench-format module
instead (kevin.search.optimize). Evaluation: the real evaluator (kevin.evaluator.service), cpp on a
CPU and cuda on a GPU unless --backend says otherwise. Run either again with the same --out to
resume. Exit codes: 0 done, 1 `kevin optimize` found no kernel that passed (and re-verified),
2 bad usage or input.

The fixed-budget study is `kevin bench --study BUDGET`, a flag rather than a `study` subcommand: it is
a bench run over the same policy, tasks and evaluator options, with the shapes in place of
--trajectories/--turns, and a subcommand would have to register every one of them again (argparse
would also let the subcommand's defaults overwrite options given before its name).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import secrets
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.evaluator.commands import add_eval_options
from kevin.tasks import (
    Task,
    add_selection_arguments,
    exclude_flagged,
    read_excluded,
    split_by_name,
    tasks_from_args,
)

SPLITS = ("none", "paper", "seeded")


def select_bench_tasks(args: argparse.Namespace) -> list[Task]:
    """The selected tasks, or one part of a split of them."""
    tasks = tasks_from_args(args)
    excluded = read_excluded(args.exclude) if args.exclude else {}
    if args.split == "none":
        chosen, _ = exclude_flagged(tasks, excluded)
        if not chosen:
            raise UsageError(f"every selected task is excluded by {args.exclude}; select more tasks")
        return chosen
    split = split_by_name(tasks, args.split, seed=args.split_seed, excluded=excluded)
    chosen = list(split.holdout if args.part == "holdout" else split.train)
    if not chosen:
        raise UsageError(f"the {args.part} part of split {args.split!r} is empty; select more tasks")
    return chosen


POLICY_FLAGS = "--replay RECORDS, --base-url URL with --model NAME, or --hf MODEL_DIR"


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    """The policy options `kevin bench` and `kevin optimize` share: exactly one of three kinds."""
    policy = parser.add_argument_group("policy (exactly one of --replay, --base-url, --hf)")
    policy.add_argument(
        "--replay", metavar="RECORDS", help="JSONL of recorded completions, or a run directory"
    )
    policy.add_argument(
        "--replay-step", type=int, default=None, help="the step to replay from a training run"
    )
    policy.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://localhost:8000/v1")
    policy.add_argument("--model", help="model name the server serves")
    policy.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    policy.add_argument("--concurrency", type=int, default=64, help="requests in flight (default 64)")
    policy.add_argument("--no-vllm-fields", action="store_true", help="send only standard OpenAI fields")
    policy.add_argument(
        "--hf",
        metavar="MODEL_DIR",
        help="a transformers model with its tokenizer (a Hugging Face name or folder, e.g. the weights "
        "`kevin train` exports), sampled in this process on the GPU when there is one",
    )
    policy.add_argument("--hf-batch-size", type=int, default=16, help="prompts per generate call (--hf)")


def build_policy(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """(policy, its description for config.json)."""
    if sum(bool(value) for value in (args.replay, args.base_url, args.hf)) != 1:
        raise UsageError(f"give exactly one policy: {POLICY_FLAGS}")
    if args.replay:
        from kevin.rl.replay import ReplayPolicy

        policy = ReplayPolicy.from_file(args.replay, step=args.replay_step)
        return policy, {
            "kind": "replay",
            "records": str(Path(args.replay).resolve()),
            "step": args.replay_step,
        }
    if args.hf:
        return _hf_policy(args.hf, args.hf_batch_size), {"kind": "hf", "model": args.hf}
    if not args.model:
        raise UsageError("--base-url needs --model: the model name the server serves")
    if args.api_key_env and not os.environ.get(args.api_key_env):
        raise UsageError(f"--api-key-env {args.api_key_env}: that environment variable is not set or empty")
    from kevin.train.policy_http import HTTPPolicy

    policy = HTTPPolicy(
        args.base_url,
        args.model,
        api_key_env=args.api_key_env or "",
        concurrency=args.concurrency,
        vllm_fields=not args.no_vllm_fields,
    )
    return policy, {"kind": "http", "base_url": args.base_url, "model": args.model}


def _hf_policy(name: str, batch_size: int) -> Any:
    """kevin.train.policy_hf.HFPolicy on a model and tokenizer loaded with from_pretrained."""
    if batch_size < 1:
        raise UsageError(f"--hf-batch-size must be at least 1 (got {batch_size})")
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise UsageError("--hf needs transformers: pip install -e '.[train]'") from None
    from kevin.train.model import TextCodec
    from kevin.train.policy_hf import HFPolicy

    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--hf {name}: cannot load a model and tokenizer there ({first[:200]})") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device).eval()
    return HFPolicy(model, TextCodec(tokenizer), device=device, batch_size=batch_size)


def evaluation_settings(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """(EvalConfig from the shared evaluation options, its description for config.json)."""
    from kevin.evaluator.commands import config_from_args

    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1 (got {args.jobs})")
    eval_config = config_from_args(args)
    description = {
        key: getattr(eval_config, key)
        for key in ("backend", "precision", "trials", "atol", "rtol", "static_check", "compile_baseline")
    }
    description["timing_budget_ms"] = args.timing_budget_ms
    return eval_config, description


def _bench_config(args: argparse.Namespace, backend: str) -> Any:
    """BenchConfig of the episode options (a study replaces its trajectories, turns and beam)."""
    from kevin.search.bench import BenchConfig

    try:
        return BenchConfig(
            trajectories=16 if args.trajectories is None else args.trajectories,
            turns=8 if args.turns is None else args.turns,
            beam=args.beam,
            backend=backend,
            temperature=args.temperature,
            max_completion_tokens=args.max_tokens,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _study_shapes(args: argparse.Namespace) -> Any:
    """The shapes of --study/--shapes (None without --study); UsageError for flags that clash."""
    if args.study is None:
        if args.shapes is not None:
            raise UsageError("--shapes needs --study BUDGET (the kernels per task every shape spends)")
        return None
    given = [
        flag for flag, value in (("--trajectories", args.trajectories), ("--turns", args.turns)) if value
    ]
    given += ["--beam"] if args.beam is not None else []
    if given:
        raise UsageError(
            f"--study runs every shape of --shapes (NxT or NxT-beamK); drop {' and '.join(given)}"
        )
    from kevin.search.study import parse_shapes

    return parse_shapes(args.shapes, args.study)


def _run_bench(args: argparse.Namespace) -> int:
    from kevin.search.bench import run_bench

    shapes = _study_shapes(args)
    tasks = select_bench_tasks(args)
    eval_config, evaluator_description = evaluation_settings(args)
    policy, policy_description = build_policy(args)
    config = _bench_config(args, eval_config.backend)
    kind = "bench" if shapes is None else "study"
    run_dir = Path(args.out) if args.out else Path("runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kevin.rl.env").setLevel(logging.INFO)  # one line per turn: the progress within a batch

    from kevin.evaluator.service import EvaluationService

    describe = {"policy": policy_description, "evaluator": evaluator_description}
    with EvaluationService(eval_config, max_in_flight=args.jobs) as evaluator:
        if shapes is not None:
            from kevin.search.study import run_study

            run_study(
                tasks,
                policy,
                evaluator,
                config,
                args.study,
                shapes,
                run_dir,
                describe=describe,
                tasks_per_batch=args.tasks_per_batch,
                out=_print,
            )
            return 0
        run_bench(
            tasks,
            policy,
            evaluator,
            config,
            run_dir,
            describe=describe,
            tasks_per_batch=args.tasks_per_batch,
            out=_print,
        )
    return 0


def _print(line: str) -> None:
    print(line, flush=True)


def _run_compare(args: argparse.Namespace) -> int:
    from kevin.search import study
    from kevin.search.report import compare, load_run

    studies = study.load_study(args.run_a), study.load_study(args.run_b)
    if studies[0] is not None and studies[1] is not None:
        text = study.compare(studies[0], studies[1], name_a=args.run_a, name_b=args.run_b)
    elif studies[0] is not None or studies[1] is not None:
        raise UsageError("compare a study (study.json) with another study, a bench run with a bench run")
    else:
        text = compare(load_run(args.run_a), load_run(args.run_b), name_a=args.run_a, name_b=args.run_b)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


def _policy_flags(args: argparse.Namespace) -> list[str]:
    if args.replay:
        step = ["--replay-step", str(args.replay_step)] if args.replay_step is not None else []
        return ["--replay", args.replay, *step]
    if args.hf:
        return ["--hf", args.hf]
    return ["--base-url", args.base_url, "--model", args.model]


def _run_optimize(args: argparse.Namespace) -> int:
    from kevin.search.breakdown import reference_profiler
    from kevin.search.optimize import OptimizeConfig, run_optimize
    from kevin.search.shapes import parse_shapes
    from kevin.search.wrap import verify_inputs_shapes

    module = Path(args.module)
    task = _optimize_task(args, module)
    shapes = [parse_shapes(text) for text in args.verify_shapes]
    shapes += [verify_inputs_shapes(text) for text in args.verify_inputs]
    eval_config, evaluator_description = evaluation_settings(args)
    try:
        config = OptimizeConfig(
            trajectories=args.trajectories,
            turns=args.turns,
            beam=args.beam,
            backend=eval_config.backend,
            temperature=args.temperature,
            max_completion_tokens=args.max_tokens,
            # sampling beside a timed kernel on the same GPU would slow it and spread its timings
            evaluate_while_generating=not (args.hf and eval_config.on_gpu),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out_dir = Path(args.out) if args.out else module.parent / f"{module.stem}_kevin"
    policy, policy_description = build_policy(args)
    command = ["kevin", "optimize", str(module), *_policy_flags(args)]
    command += ["--trajectories", str(config.trajectories), "--turns", str(config.turns)]
    command += ["--beam", str(config.beam)] if config.beam is not None else []
    command += ["--backend", config.backend]
    if args.class_name:
        command += ["--class", args.class_name, "--inputs", args.inputs, "--init-args", args.init_args]
    command += [part for text in args.verify_shapes for part in ("--verify-shapes", text)]
    command += [part for text in args.verify_inputs for part in ("--verify-inputs", text)]
    command += ["--out", str(out_dir)]
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from kevin.evaluator.evaluate import evaluate
    from kevin.evaluator.service import EvaluationService

    def verify(check_task: Task, source: str) -> Any:  # fresh inputs and weights: a new secret seed
        return evaluate(check_task, source, dataclasses.replace(eval_config, seed=secrets.randbits(48)))

    with EvaluationService(eval_config, max_in_flight=args.jobs) as evaluator:
        outcome = run_optimize(
            task,
            policy,
            evaluator,
            verify,
            config,
            out_dir,
            stem=module.stem,
            shapes=shapes,
            describe={"policy": policy_description, "evaluator": evaluator_description},
            command=shlex.join(command),
            out=_print,
            profile_reference=None if args.no_profile else reference_profiler(eval_config.backend, eval_config.cache_dir),
        )
    if args.class_name:  # the problem kevin made of the class, as the evaluator saw it
        (out_dir / f"{module.stem}_problem.py").write_text(task.source, encoding="utf-8")
    if outcome.winner is None:
        print(f"kevin: no winner: {outcome.reason}", file=sys.stderr)
        return 1
    return 0


def _optimize_task(args: argparse.Namespace, module: Path) -> Task:
    """MODULE.py as a problem: as it is (KernelBench format), or `--class` wrapped (kevin.search.wrap)."""
    from kevin.search.optimize import load_module
    from kevin.search.wrap import parse_init_args, parse_inputs, wrap_class
    from kevin.tasks.loaders import read_problem_text

    if not args.class_name:
        given = [
            flag
            for flag, value in (
                ("--inputs", args.inputs),
                ("--init-args", args.init_args),
                ("--verify-inputs", args.verify_inputs),
            )
            if value
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)} describe a --class; name the module class with --class NAME"
            )
        return load_module(module)
    if not module.is_file():
        raise UsageError(
            f"module not found: {module}; give the path of a .py file defining --class {args.class_name}"
        )
    if not args.inputs:
        raise UsageError(
            f"--class {args.class_name}: give its forward's example inputs with --inputs, e.g. 16x1024"
        )
    source = wrap_class(
        read_problem_text(module),
        args.class_name,
        parse_inputs(args.inputs),
        parse_init_args(args.init_args),
        where=str(module),
    )
    return Task.from_source(
        source, id=module.stem, name=module.stem, level=0, problem=0, origin=str(module.resolve())
    )


def _register_optimize(subparsers) -> None:
    parser = subparsers.add_parser(
        "optimize",
        help="search for a faster ModelNew for one KernelBench-format module; write it as a drop-in",
        description="Run N trajectories x T refinement turns (optionally a beam: keep the top K by score "
        "after each turn, branch each into N/K) on MODULE.py (Model, get_inputs, get_init_inputs), "
        "verify the fastest passed kernel again with a fresh seed (and at --verify-shapes), and write "
        "<stem>_kevin.py (ModelNew), report.md, report.png, episodes.jsonl and config.json into --out. "
        "Run it again with the same --out to resume. Exit 1 when no kernel passed.",
    )
    parser.add_argument(
        "module", metavar="MODULE.py", help="the module: Model, get_inputs(), get_init_inputs()"
    )
    add_policy_arguments(parser)
    search = parser.add_argument_group("search")
    search.add_argument("--trajectories", type=int, default=16, help="parallel trajectories (default 16)")
    search.add_argument("--turns", type=int, default=8, help="refinement turns (default 8)")
    search.add_argument(
        "--beam",
        type=int,
        default=None,
        metavar="K",
        help="after each turn keep the K best trajectories by score, each continued by N/K (K divides N)",
    )
    search.add_argument("--temperature", type=float, default=0.9)
    search.add_argument("--max-tokens", type=int, default=16384, help="most tokens per completion")
    search.add_argument(
        "--verify-shapes",
        action="append",
        default=[],
        metavar="NAME=VALUE[,...]",
        help="also verify the winner with these module-level constants of MODULE.py set (e.g. "
        "batch_size=64,dim=4096); repeat for more shape sets",
    )
    wrapped = parser.add_argument_group("a module class by flag (MODULE.py not in KernelBench format)")
    wrapped.add_argument(
        "--class", dest="class_name", metavar="NAME", help="the nn.Module class of MODULE.py to optimise"
    )
    wrapped.add_argument(
        "--inputs",
        default="",
        metavar="SHAPE[:DTYPE],...",
        help="its forward's example inputs, e.g. 16x1024,1024:bf16 (float: normal; int: [0, 128))",
    )
    wrapped.add_argument(
        "--init-args",
        default="",
        metavar="ARGS",
        help='its constructor\'s arguments as Python literals, e.g. "1024, 0.1"',
    )
    wrapped.add_argument(
        "--verify-inputs",
        action="append",
        default=[],
        metavar="SHAPE[:DTYPE],...",
        help="also verify the winner with these inputs (same count and order as --inputs); repeat for more",
    )
    evaluation = parser.add_argument_group("evaluation")
    add_eval_options(evaluation)
    evaluation.add_argument("--jobs", type=int, default=4, help="evaluations at once (default 4)")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="output directory (default <stem>_kevin/ beside MODULE.py); reuse it to resume",
    )
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="leave the report's 'Where the time went' out (it profiles the module's Model once)",
    )
    parser.set_defaults(run=_run_optimize)


def register_commands(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run a policy over tasks (N trajectories x T turns) and report the paper's Table 1; compare runs",
        description="Run a policy (replayed completions or an OpenAI-compatible server) over a task set "
        "through the real evaluator into a resumable run directory: episodes.jsonl, metrics.json, "
        "metrics.md, curves.png. --study BUDGET runs the same kernel budget per task in several shapes "
        "(16x8, 32x4, 128x1, a beam) and compares them. 'kevin bench compare RUN_A RUN_B' sets two runs "
        "(or two studies) side by side.",
    )
    add_policy_arguments(parser)
    episodes = parser.add_argument_group("episodes")
    episodes.add_argument(
        "--trajectories", type=int, default=None, help="parallel trajectories per task (default 16)"
    )
    episodes.add_argument(
        "--turns", type=int, default=None, help="refinement turns per trajectory (default 8)"
    )
    episodes.add_argument(
        "--beam",
        type=int,
        default=None,
        metavar="K",
        help="after each turn keep each task's K best trajectories by score, each continued by N/K (K divides N)",
    )
    study = parser.add_argument_group("fixed-budget study")
    study.add_argument(
        "--study",
        type=int,
        default=None,
        metavar="BUDGET",
        help="spend BUDGET kernels per task in each shape of --shapes, one run directory each under --out; "
        "write study.json, study.md and study.png",
    )
    study.add_argument(
        "--shapes",
        default=None,
        metavar="LIST",
        help="comma-separated NxT (N trajectories x T turns) or NxT-beamK, each with N x T = BUDGET "
        "(default for 128: 16x8,32x4,128x1,16x8-beam4)",
    )
    episodes.add_argument("--temperature", type=float, default=0.9)
    episodes.add_argument("--max-tokens", type=int, default=16384, help="most tokens per completion")
    episodes.add_argument(
        "--tasks-per-batch", type=int, default=8, help="tasks whose turns go to the policy together"
    )
    selection = parser.add_argument_group("tasks")
    add_selection_arguments(selection)
    selection.add_argument(
        "--split",
        default="none",
        metavar="NAME",
        help="none (default), paper, seeded, or a split JSON file (a generated set writes split.json)",
    )
    selection.add_argument(
        "--part", choices=("holdout", "train"), default="holdout", help="which part of --split"
    )
    selection.add_argument("--split-seed", type=int, default=0, help="seed of the paper and seeded splits")
    selection.add_argument(
        "--exclude",
        metavar="REPORT",
        default="kernelbench",
        help="leave out the tasks a validation report flags (bench/kernelbench_hygiene.py's JSON or "
        "`kevin tasks validate --json`): degenerate, nondeterministic; default `kernelbench`, the 19 "
        "KernelBench problems kevin ships as flagged; '' for none",
    )
    evaluation = parser.add_argument_group("evaluation")
    add_eval_options(evaluation)
    evaluation.add_argument("--jobs", type=int, default=4, help="evaluations at once (default 4)")
    parser.add_argument(
        "--out", metavar="DIR", help="run directory (default runs/bench-<time>); reuse it to resume"
    )
    parser.set_defaults(run=_run_bench)

    commands = parser.add_subparsers(dest="bench_command", metavar="compare", parser_class=type(parser))
    compare = commands.add_parser(
        "compare",
        help="two bench runs' metrics side by side, with differences (markdown)",
        description="Table 1 of RUN_A and RUN_B side by side, B - A, overall and by number of turns.",
    )
    compare.add_argument("run_a", metavar="RUN_A", help="a kevin bench run directory")
    compare.add_argument("run_b", metavar="RUN_B", help="another one")
    compare.add_argument("--out", metavar="FILE", help="also write the markdown here")
    compare.set_defaults(run=_run_compare)

    _register_optimize(subparsers)
