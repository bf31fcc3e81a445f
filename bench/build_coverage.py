"""How much of our CUDA candidate corpus the fast build covers, measured on a CPU (issue #15, finding 3).

For each candidate its `load_inline` call is captured (the file runs with a load_inline that raises
once it has its arguments), then kevin.evaluator.fastbuild plans it and writes the very sources and
rewritten build.ninja a fast build would (`fastbuild.prepare`), and ninja runs the compile steps
only: main.cpp with the host compiler, cuda.cu with nvcc, both against the light headers. Nothing is
linked (no shim is needed) or loaded, so no GPU either; a GPU run of bench/build_speed.py confirms
the link and the results.

Each candidate is one of:

    fast      both objects compile against the light headers (the fast path would take it)
    fallback  not eligible (fastbuild.plan's reason) or a compile error (its first error line):
              the real load_inline would build it, slowly
    broken    a candidate written not to compile (the throughput manifest's compile_error kind):
              it fails on both paths and is left out of the fast-path share

Corpora: `throughput` (bench/candidates/throughput, as bench/eval_throughput.py runs them),
`bundled` (kevin/tasks/bundled/cuda), `kernelbench_l1` (bench/candidates/kernelbench_l1),
`honest` (bench/adversarial/honest_*_cuda.py, rendered), `train` (every fourth of kevin.train.kernels' CUDA
variants of the first task of each kind) and `build_coverage` (bench/candidates/build_coverage: fp16/bf16,
vectorised, templated and accessor kernels the others lack).

    nice -n 19 python bench/build_coverage.py [--corpus NAME ...] [--work DIR]
        [--out bench/results/build_coverage_cpu.md]

A compile that passed is remembered under --work (by the hash of its sources, build file and the
light headers), so a second run only compiles what changed. The arch is TORCH_CUDA_ARCH_LIST (9.0a,
the H200's, unless set).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import inspect
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from kevin.evaluator import fastbuild  # noqa: E402

CORPORA = ("throughput", "bundled", "kernelbench_l1", "honest", "train", "build_coverage")


def _cuda_home() -> None:
    """A CPU build of torch sets cpp_extension.CUDA_HOME to None whatever the environment says, and
    its build-file writer then refuses CUDA sources; point it at the nvcc on this machine."""
    import torch.utils.cpp_extension as ce

    nvcc = shutil.which("nvcc")
    if ce.CUDA_HOME is None and nvcc:
        home = Path(os.environ.get("CUDA_HOME") or Path(nvcc).resolve().parent.parent)
        if not (home / "include" / "cuda_runtime.h").exists():
            home = Path("/usr/local/cuda")
        ce.CUDA_HOME = str(home)


NO_SHIM = Path("/nonexistent/kevin_shim_coverage.so")  # only the link step reads it; we never link


@dataclass
class Candidate:
    corpus: str
    name: str
    source: str  # the candidate file's text
    broken: bool = False  # written not to compile


@dataclass
class Outcome:
    candidate: Candidate
    status: str  # fast, fallback, broken
    reason: str = ""
    seconds: float = 0.0


# -- the corpora ---------------------------------------------------------------------------------


def _files(corpus: str, paths: list[Path]) -> list[Candidate]:
    return [Candidate(corpus, p.name, p.read_text()) for p in paths]


def throughput() -> list[Candidate]:
    folder = ROOT / "bench/candidates/throughput"
    manifest = json.loads((folder / "manifest.json").read_text())
    return [
        Candidate(
            "throughput", e["candidate"], (folder / e["candidate"]).read_text(), e["kind"] == "compile_error"
        )
        for e in manifest
    ]


def honest() -> list[Candidate]:
    from adversarial import render

    paths = sorted((ROOT / "bench/adversarial").glob("honest_*_cuda.py"))
    return [Candidate("honest", p.name, render(p)) for p in paths]


def train() -> list[Candidate]:
    from kevin.train.family import generate_family
    from kevin.train.kernels import variants

    firsts: dict[str, object] = {}
    for spec in generate_family(0):
        firsts.setdefault(spec.kind, spec)
    # Every fourth variant: the variants of a kind differ mostly in block size, not in the API used.
    return [
        Candidate("train", f"{spec.name}/{v.name}", v.source)
        for spec in firsts.values()
        for v in variants(spec, "cuda")[::4]
    ]


def corpus(name: str) -> list[Candidate]:
    if name == "throughput":
        return throughput()
    if name == "honest":
        return honest()
    if name == "train":
        return train()
    folder = {
        "bundled": "kevin/tasks/bundled/cuda",
        "kernelbench_l1": "bench/candidates/kernelbench_l1",
        "build_coverage": "bench/candidates/build_coverage",
    }[name]
    paths = sorted(p for p in (ROOT / folder).glob("*.py") if not p.name.startswith(("_", "problem_")))
    return _files(name, paths)


# -- one candidate -------------------------------------------------------------------------------


class _Captured(Exception):
    pass


def captured_calls(source: str) -> list[dict]:
    """The bound arguments of the file's first load_inline call (the file runs until it makes it)."""
    import torch.utils.cpp_extension as ce

    real = ce.load_inline
    calls: list[dict] = []

    def capture(*args, **kwargs):
        bound = inspect.signature(real).bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append(dict(bound.arguments))
        raise _Captured

    ce.load_inline = capture
    try:
        with contextlib.suppress(_Captured):
            exec(compile(source, "<candidate>", "exec"), {"__name__": "kevin_coverage_candidate"})
    finally:
        ce.load_inline = real
    return calls


def _lite_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(fastbuild.LITE_INCLUDE.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(fastbuild.LITE_INCLUDE)).encode() + path.read_bytes())
    return digest.hexdigest()


def first_error(output: str) -> str:
    """The compiler's first error line, without the build directory (so equal errors group)."""
    lines = [line for line in output.splitlines() if re.search(r"\berror\b", line)]
    line = lines[0] if lines else (output.strip().splitlines() or ["build failed"])[-1]
    line = re.sub(r"^.*?/(main\.cpp|cuda\.cu)", r"\1", line)
    return re.sub(r"\s+", " ", line).strip()[:160]


def compile_objects(directory: Path, timeout_s: float) -> tuple[bool, str]:
    """Run the build file's compile steps (not the link); (ok, first error line)."""
    ninja = (directory / "build.ninja").read_text()
    objects = re.findall(r"^build (\S+\.o): (?:compile|cuda_compile) ", ninja, re.M)
    command = [
        "nice",
        "-n",
        "19",
        shutil.which("ninja") or "ninja",
        "-j",
        "1",
        "-C",
        str(directory),
        *objects,
    ]
    returncode, output = fastbuild.run_killable(command, directory, timeout_s)
    return returncode == 0, "" if returncode == 0 else first_error(output)


def check(candidate: Candidate, work: Path, lite: str, timeout_s: float) -> Outcome:
    started = time.perf_counter()
    try:
        calls = captured_calls(candidate.source)
    except Exception as exc:  # noqa: BLE001 - a candidate that does not even run to its load_inline
        return Outcome(candidate, "broken" if candidate.broken else "fallback", f"capture: {exc}"[:160])
    if not calls:
        return Outcome(candidate, "fallback", "no load_inline call")
    try:
        plan = fastbuild.plan(calls[0])
    except fastbuild.NotEligible as exc:
        return Outcome(candidate, "broken" if candidate.broken else "fallback", f"not eligible: {exc}"[:160])
    staging = work / "staging"
    arch = {"TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0a")}
    try:
        fastbuild.prepare(plan, staging, NO_SHIM, arch)
    except fastbuild.NotEligible as exc:
        return Outcome(candidate, "fallback", f"not eligible: {exc}"[:160])
    key = hashlib.sha256(
        lite.encode() + b"".join(p.read_bytes() for p in sorted(staging.iterdir()) if p.is_file())
    ).hexdigest()[:20]
    done = work / "passed" / key
    if done.exists():
        ok, reason = True, ""
    else:
        ok, reason = compile_objects(staging, timeout_s)
        if ok:
            done.parent.mkdir(parents=True, exist_ok=True)
            done.touch()
    if candidate.broken:
        return Outcome(candidate, "broken", reason or "compiles (its error is at link or run time)")
    status = "fast" if ok else "fallback"
    return Outcome(candidate, status, reason, time.perf_counter() - started)


# -- the report ----------------------------------------------------------------------------------


def _reason_group(reason: str) -> str:
    """A reason without its line numbers, so the same missing name counts once per corpus."""
    return re.sub(r"\((\d+)\)|:\d+(:\d+)?", "", reason)


def table(outcomes: list[Outcome]) -> list[str]:
    lines = [
        "| corpus | n | broken (left out) | fast path | fast-path % | top fallback reasons |",
        "|---|---:|---:|---:|---:|---|",
    ]
    by_corpus: dict[str, list[Outcome]] = collections.defaultdict(list)
    for outcome in outcomes:
        by_corpus[outcome.candidate.corpus].append(outcome)
    by_corpus["all"] = outcomes
    for name, group in by_corpus.items():
        counted = [o for o in group if o.status != "broken"]
        fast = sum(o.status == "fast" for o in counted)
        reasons = collections.Counter(_reason_group(o.reason) for o in counted if o.status == "fallback")
        top = "; ".join(f"{n}x `{r[:90]}`" for r, n in reasons.most_common(3)).replace("|", "/")
        share = 100.0 * fast / len(counted) if counted else float("nan")
        lines.append(
            f"| {name} | {len(group)} | {len(group) - len(counted)} | {fast} | {share:.1f} | {top} |"
        )
    return lines


def report(outcomes: list[Outcome]) -> list[str]:
    lines = [
        "# Fast-path coverage of the CUDA candidates (compile step on a CPU)",
        "",
        "Written by `nice -n 19 python bench/build_coverage.py`: each candidate's fast-build sources and",
        "build file (kevin.evaluator.fastbuild.prepare), compiled against the light headers, not linked.",
        "",
        *table(outcomes),
        "",
        "## Fallbacks",
        "",
    ]
    fallbacks = [o for o in outcomes if o.status == "fallback"]
    lines += [f"* {o.candidate.corpus}/{o.candidate.name}: `{o.reason}`" for o in fallbacks] or ["none"]
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=CORPORA, help="only these (repeatable)")
    parser.add_argument("--only", default="", help="only candidates whose name contains this")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kevin-build-coverage"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/build_coverage_cpu.md")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument(
        "--lite", type=Path, default=None, help="another copy of the light headers (before/after)"
    )
    args = parser.parse_args(argv)
    if args.lite is not None:
        fastbuild.LITE_INCLUDE = args.lite.resolve()
    _cuda_home()
    lite = _lite_digest()
    outcomes = []
    for name in args.corpus or CORPORA:
        for candidate in corpus(name):
            if args.only not in candidate.name:
                continue
            outcome = check(candidate, args.work, lite, args.timeout_s)
            outcomes.append(outcome)
            print(
                f"{name:15s} {candidate.name:45s} {outcome.status:8s} {outcome.seconds:5.1f} s {outcome.reason[:100]}",
                flush=True,
            )
    lines = report(outcomes)
    print("\n".join(table(outcomes)))
    if not args.only:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
