"""`kevin profile` over bundled candidates (issue #19 item 2): the raw reports and summaries to commit.

    python bench/profile_bundled.py --out bench/results/h200/sNN/profile [--size large]
        [--backend cuda] [--tool auto|ncu|torch] [--tasks 01_gelu_tanh,03_softmax,05_matmul]

For each bundled task (kevin/tasks/bundled/tasks/NAME.py at `--size`, with its honest candidate
kevin/tasks/bundled/BACKEND/NAME.py) it runs kevin.evaluator.profiling.run.profile, as `kevin
profile` does, and writes under --out:

    NAME.raw.csv       ncu's own raw-page CSV (NAME.raw.json: torch.profiler's table instead)
    NAME.summary.txt   the summary a model would read (the default budget, 1200 characters)
    NAME.report.json   tool, per-kernel statistics, error and blame
    summary.md         one section per task: tool, wall seconds, summary or error; then the versions

Exit code 0 when every task gave a profile, 1 otherwise. A committed NAME.raw.csv is what
tests/evaluator/test_profiling.py's hand-made report is replaced by (a test against the real one).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

from kevin.evaluator.profiling.run import TOOLS, ProfileConfig, find_ncu, profile
from kevin.tasks import bundled_dir
from kevin.tasks.loaders import BUNDLED_SIZES, with_size

DEFAULT_TASKS = ("01_gelu_tanh", "03_softmax", "05_matmul")


def profile_task(name: str, config: ProfileConfig, size: str, out: Path) -> tuple[bool, str]:
    """Profile one bundled task's candidate; write its files; (ok, its summary.md section)."""
    problem = with_size((bundled_dir() / f"{name}.py").read_text(), size)
    candidate = (bundled_dir().parent / config.backend / f"{name}.py").read_text()
    started = time.monotonic()
    report = profile(problem, candidate, config)
    seconds = time.monotonic() - started
    if report.raw:
        suffix = "csv" if report.tool == "ncu" else "json"
        (out / f"{name}.raw.{suffix}").write_text(report.raw)
    (out / f"{name}.summary.txt").write_text(report.summary + "\n")
    (out / f"{name}.report.json").write_text(report.to_json() + "\n")
    body = report.summary if report.ok else f"no profile (blame={report.blame}): {report.error}"
    section = f"## {name} ({config.backend}, {size}): {report.tool}, {seconds:.1f} s\n\n```\n{body}\n```\n"
    return report.ok, section


def versions() -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (
        f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
        f"{gpu}, ncu {find_ncu() or 'not found'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the reports (created)")
    parser.add_argument("--backend", choices=("cuda", "triton", "cpp"), default="cuda")
    parser.add_argument("--tool", choices=TOOLS, default="auto")
    parser.add_argument("--size", choices=BUNDLED_SIZES, default="large")
    parser.add_argument(
        "--tasks", default=",".join(DEFAULT_TASKS), help="bundled task names, comma-separated"
    )
    parser.add_argument("--forward-calls", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    config = ProfileConfig(
        backend=args.backend,
        tool=args.tool,
        forward_calls=args.forward_calls,
        timeout_s=args.timeout_s,
        cache_dir=args.cache_dir,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sections, all_ok = [], True
    for name in [n.strip() for n in args.tasks.split(",") if n.strip()]:
        ok, section = profile_task(name, config, args.size, out)
        all_ok &= ok
        sections.append(section)
        print(section, flush=True)
    text = "# kevin profile of bundled candidates\n\n" + "\n".join(sections) + f"\n{versions()}\n"
    (out / "summary.md").write_text(text)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
