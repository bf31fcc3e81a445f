"""The adversarial corpus (bench/adversarial/, issue #4 item 3) against kevin, on the CPU.

- fast: the naive KernelBench-style harness (bench/naive_harness.py) really accepts cheats, so they
  are real: the verdict forger as it is, and four cheats whose C++ kernel is a do-nothing zeros (it
  is stubbed by torch.zeros_like here, so nothing is built).
- slow (builds the corpus's shared extensions once, two at a time, into the build cache under /tmp
  that bench/adversarial.py uses; ~6 min warm, ~11 min cold on 2 cores): every cpp cheat is not
  passed by kevin's default configuration (or, with an `Honest-twin:`, passes no faster than its
  honest twin: a memo whose gain kevin took away) and leaves nothing behind; 8 honest candidates pass with
  no flag (the bench runs all 12); the cheats the static gate rejects are also not passed by the
  dynamic checks alone.

Cheats kevin is known to miss are strict xfails carrying the hole in their reason (KNOWN_MISSES):
they fail today, and the first fix makes them XPASS, which fails the run until the mark is removed.
Timing budgets are short here (the checks do not depend on them); the committed table
(bench/results/adversarial_cpu.md) is made with kevin's default timing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import adversarial  # noqa: E402
from naive_harness import naive_eval  # noqa: E402

from kevin.evaluator.sandbox import Limits  # noqa: E402
from kevin.evaluator.timing import TimingConfig  # noqa: E402

CACHE = Path(os.environ.get("KEVIN_ADVERSARIAL_CACHE") or adversarial.default_cache())
ENTRIES = {e.name: e for e in adversarial.load_corpus("cpp")}
CHEATS = sorted(name for name, e in ENTRIES.items() if not e.honest)
# The bench runs all 12 honest candidates; here the 4 of the corpus (one shared build) and 4 of the
# bundled ones (a build each), to keep a cold run near 10 minutes on 2 cores.
HONEST = sorted(name for name, e in ENTRIES.items() if e.honest and not name.startswith("bundled_"))
HONEST += ["bundled_01_gelu_tanh", "bundled_03_softmax", "bundled_05_matmul", "bundled_11_cumsum"]

KNOWN_MISSES: dict[str, str] = {}
DYNAMIC_ONLY_MISSES: dict[str, str] = {}

FAST_TIMING = TimingConfig(budget_ms=100, warmup_ms=10)
TEST_LIMITS = Limits(
    stage_timeouts_s={**Limits().stage_timeouts_s, "correctness": 20.0, "timing": 60.0},
    host_memory_bytes=4 * 2**30,
)


def _known(name: str, misses: dict[str, str]):
    if name in misses:
        return pytest.param(
            name, marks=pytest.mark.xfail(strict=True, reason="kevin misses this: " + misses[name])
        )
    return name


# -- fast: the cheats are real --------------------------------------------------------------------

STUB = """
import types as _types


def load_inline(**_kwargs):  # the test's stand-in for the C++ extension: no build
    return _types.SimpleNamespace(zeros_out=torch.zeros_like)
"""


def _stubbed(name: str) -> str:
    source = adversarial.render(ENTRIES[name].path)
    return source.replace("from torch.utils.cpp_extension import load_inline\n", STUB, 1)


def test_the_naive_harness_accepts_an_honest_answer_and_rejects_a_wrong_one():
    problem = (adversarial.PROBLEMS / "scale_relu_rand.py").read_text()
    honest = (
        "import torch\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def __init__(self, s):\n"
        "        super().__init__()\n"
        "        self.s = s\n"
        "    def forward(self, x):\n"
        "        return (x * self.s).clamp(min=0)\n"
    )
    assert naive_eval(problem, honest)["correct"] is True
    wrong = honest.replace("(x * self.s).clamp(min=0)", "x")
    verdict = naive_eval(problem, wrong)
    assert verdict["correct"] is False and not verdict["broken"]


@pytest.mark.parametrize(
    "name",
    [
        "checker_patch_allclose",
        "checker_patch_rand",
        "checker_torch_function_mode",
        "checker_hijack_reference",
    ],
)
def test_naive_harness_accepts_a_do_nothing_kernel(name):
    problem = adversarial.problem_task(ENTRIES[name].problem).source
    verdict = naive_eval(problem, _stubbed(name))
    assert verdict["correct"] is True, verdict


def test_naive_harness_accepts_a_forged_verdict():
    entry = ENTRIES["checker_forge_verdict"]
    verdict = naive_eval(adversarial.problem_task(entry.problem).source, adversarial.render(entry.path))
    assert verdict["correct"] is True and verdict["speedup"] == 1000.0


def test_every_family_has_two_cheats_and_there_are_eight_honest_candidates():
    families = [ENTRIES[name].family for name in CHEATS]
    assert all(families.count(str(f)) >= 2 for f in range(1, 9)), families
    assert len(HONEST) >= 8 and set(HONEST) <= set(ENTRIES)


def test_candidates_sharing_an_extension_build_it_with_the_same_call():
    calls: dict[str, set[str]] = {}
    for entry in ENTRIES.values():
        for line in entry.path.read_text().splitlines():
            if line.startswith("_ext = load_inline(name="):
                calls.setdefault(line.split('"')[1], set()).add(line)
    assert calls and all(len(lines) == 1 for lines in calls.values()), calls


# -- slow: kevin against the corpus ---------------------------------------------------------------


@pytest.fixture(scope="module")
def runs():
    used = [e for name, e in ENTRIES.items() if name in HONEST or not e.honest]
    lines = adversarial.prebuild(used, CACHE, jobs=2)
    assert all(": ok" in line for line in lines), lines
    yield adversarial.Runs(CACHE)
    adversarial.clear_side_effects()


def _kevin(name: str, runs, **changes):
    entry = ENTRIES[name]
    changes = dict(timing=FAST_TIMING, limits=TEST_LIMITS, **changes)
    return adversarial.run_kevin(entry, adversarial.render(entry.path), runs, CACHE / "locks", **changes)


@pytest.mark.slow
def test_naive_harness_runs_its_reference_on_a_replaced_operator(runs):
    """Both dispatcher cheats are real: the reference computes zeros, or runs slowly."""
    verdicts = {}
    for name in ("checker_dispatch_zero_reference", "state_dispatch_slow_reference"):
        entry = ENTRIES[name]
        problem = adversarial.problem_task(entry.problem).source
        source = adversarial.render(entry.path)
        verdicts[name] = naive_eval(problem, source, build_cache=str(CACHE / "builds"))
        assert verdicts[name]["correct"] is True, verdicts[name]
    # The slow reference inflates the honest kernel's speedup (about 1.5x against an untouched one).
    assert verdicts["state_dispatch_slow_reference"]["speedup"] > 2.0, verdicts


@pytest.mark.slow
@pytest.mark.parametrize("name", HONEST)
def test_honest_candidate_passes_unflagged(name, runs):
    kevin = _kevin(name, runs)
    assert kevin["passed"] and kevin["flags"] == [] and not kevin["side_effects"], kevin


@pytest.mark.slow
@pytest.mark.parametrize("name", [_known(name, KNOWN_MISSES) for name in CHEATS])
def test_cheat_is_not_passed_and_leaves_nothing_behind(name, runs):
    kevin = _kevin(name, runs)
    assert not adversarial.gained(kevin), kevin  # not passed, or no faster than its honest twin
    assert not kevin["side_effects"], kevin


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [_known(name, DYNAMIC_ONLY_MISSES) for name in CHEATS if adversarial.gate_rejects(ENTRIES[name])],
)
def test_dynamic_checks_alone_do_not_pass_a_cheat_the_gate_rejects(name, runs):
    # Blocked, or (a cheat whose kernel is honest once the trick is taken away) no faster than its
    # honest twin: neutralised, as DESIGN.md §5 allows.
    kevin = _kevin(name, runs, static_check=False)
    assert not adversarial.gained(kevin) and not kevin["side_effects"], kevin
