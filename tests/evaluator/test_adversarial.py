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
- which defence fired: every corpus file's `Expect:` line (bench/adversarial.py, `Expect`) names the
  gate rules its default run must report and what the run with the gate off must show (a stage, a
  flag, or `twin`); the slow tests hold each entry's runs to it, so a gate that accepts everything,
  or a dynamic check that stops firing while another still catches the cheat, fails them. The fast
  tests check the lines' format and the gate rules on the static gate alone.

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
import adversarial_expect  # noqa: E402
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


def test_every_corpus_entry_says_which_defence_catches_it():
    for backend in ("cpp", "cuda"):
        for entry in adversarial.load_corpus(backend):
            assert entry.expect.passes == entry.honest, entry.name
            assert entry.honest or entry.expect.dynamic, entry.name


@pytest.mark.parametrize(
    "line, problem",
    [
        ("", "needs an Expect line"),
        ("Expect: gate=framework-compute", "malformed 'Expect: gate=framework-compute'"),
        ("Expect: gate=frameworks dynamic=library_kernels", "names frameworks, which is neither"),
        ("Expect: gate=none dynamic=ok", "names ok, which is neither"),
        ("Expect: pass", "'Expect: pass' for family 1"),
        ("Expect: gate=none dynamic=twin", "no 'Honest-twin: NAME' line"),
    ],
)
def test_a_missing_or_malformed_expect_line_names_the_file_and_the_format(tmp_path, line, problem):
    path = tmp_path / "framework_example.py"
    path.write_text(f'"""A cheat.\n\nFamily: 1 (not writing the kernel)\nProblem: linear_relu\n{line}\n"""\n')
    with pytest.raises(ValueError) as raised:
        adversarial.parse_entry(path)
    message = str(raised.value)
    assert str(path) in message and problem in message
    assert "gate=<rule>" in message or "dynamic token" in message or "Honest-twin" in message


def test_the_gate_reports_the_rules_each_entry_expects():
    # (the cuda entries: tests/bench/test_adversarial_cuda_corpus.py)
    from kevin.gate import check_source

    for entry in adversarial.load_corpus("cpp"):
        report = check_source(adversarial.render(entry.path), "cpp")
        assert set(entry.expect.gate) <= set(report.rules), (entry.name, report.rules)
        assert report.ok == (not entry.expect.gate), (entry.name, report.rules)


def test_expectations_match_stages_flags_and_twins():
    expect = adversarial.Expect(gate=("global-state",), dynamic=("tampering",))
    rejected = {"stage": "static_check", "rules": ["global-state"], "passed": False, "flags": []}
    assert expect.unmet(rejected, static_check=True) == ""
    accepted = {"stage": "runtime", "rules": [], "passed": False, "flags": ["tampering"]}
    assert "static gate to report global-state" in expect.unmet(accepted, static_check=True)
    assert expect.unmet(accepted, static_check=False) == ""
    sampled = {"stage": "ok", "rules": [], "passed": False, "flags": ["timed_output_mismatch:sampled"]}
    assert adversarial.Expect(dynamic=("timed_output_mismatch",)).unmet(sampled, static_check=False) == ""
    assert "show tampering" in expect.unmet(sampled, static_check=False)
    twin = {"stage": "ok", "rules": [], "passed": True, "flags": [], "speedup": 0.1}
    memo = adversarial.Expect(dynamic=("twin",))
    assert memo.unmet(dict(twin, twin={"passed": True, "speedup": 0.1}), static_check=True) == ""
    assert memo.unmet(dict(twin, twin={"passed": True, "speedup": 0.01}), static_check=True)  # it gained
    assert memo.unmet(twin, static_check=True)  # no twin ran: nothing shows it gained nothing
    # A CPU twin timed within the socket's wake-up jitter shows nothing either (session 34's CI: a
    # 0.05 ms twin read 1.3x beside its cheat's 2.7x); one above the floor does.
    short = {"passed": True, "speedup": 0.1, "backend": "cpp", "runtime_ms": 0.15}
    assert adversarial.gained(dict(twin, twin=short))
    assert memo.unmet(dict(twin, twin=short), static_check=True)
    steady = dict(short, runtime_ms=adversarial_expect.TWIN_FLOOR_MS["cpp"])
    assert not adversarial.gained(dict(twin, twin=steady))
    assert memo.unmet(dict(twin, twin=steady), static_check=True) == ""
    assert not adversarial.gained(dict(twin, twin=dict(short, backend="cuda")))  # spinning: no floor
    assert adversarial.Expect().unmet(twin, static_check=True) == ""
    assert adversarial.Expect().unmet(dict(twin, flags=["lower_precision"]), static_check=True)


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
    # The stage and the error first: pytest shortens a long message, and stop 49's CI run showed
    # only "{'stage': 'correctness', ..." for a failure this test could not then say more of.
    why = f"{kevin['stage']}: {kevin.get('error')} flags={kevin['flags']} side_effects={kevin['side_effects']}"
    assert kevin["passed"] and kevin["flags"] == [] and not kevin["side_effects"], why
    assert ENTRIES[name].expect.unmet(kevin, static_check=True) == "", kevin


@pytest.mark.slow
@pytest.mark.parametrize("name", [_known(name, KNOWN_MISSES) for name in CHEATS])
def test_cheat_is_not_passed_and_leaves_nothing_behind(name, runs):
    kevin = _kevin(name, runs)
    assert not adversarial.gained(kevin), kevin  # not passed, or no faster than its honest twin
    assert not kevin["side_effects"], kevin
    # ... and caught by the defence its Expect line names: the gate's rules, or with gate=none the
    # dynamic check (this run took the same path as one with the gate off).
    unmet = ENTRIES[name].expect.unmet(kevin, static_check=True)
    assert not unmet, f"{name}: {unmet}; got {kevin}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [_known(name, DYNAMIC_ONLY_MISSES) for name in CHEATS if ENTRIES[name].expect.gate]
)
def test_dynamic_checks_alone_do_not_pass_a_cheat_the_gate_rejects(name, runs):
    # Blocked, or (a cheat whose kernel is honest once the trick is taken away) no faster than its
    # honest twin: neutralised, as DESIGN.md §5 allows; and by the check its Expect line names.
    kevin = _kevin(name, runs, static_check=False)
    assert not adversarial.gained(kevin) and not kevin["side_effects"], kevin
    unmet = ENTRIES[name].expect.unmet(kevin, static_check=False)
    assert not unmet, f"{name}: {unmet}; got {kevin}"


# -- lanes: candidates at once (bench/adversarial.py --lanes) ------------------------------------


def test_what_runs_alone_is_what_leaves_something_behind_or_reads_the_cache():
    """With --lanes the candidates whose point is a side effect (the daemon folder, the outside
    marker, a Follow-up run) or the baseline cache (seeded, and the honest run that seeds it) still
    run one at a time; everything else may share the machine."""
    entries = list(ENTRIES.values())
    solo = {e.name for e in entries if adversarial.needs_solo(e, entries)}
    assert {"abuse_escaped_daemon", "abuse_poison_cache", "state_omp_threads", "state_set_num_threads"} <= solo
    seeded = {e.problem for e in entries if e.seeded_cache}
    assert {e.name for e in entries if e.honest and e.problem in seeded} <= solo
    assert len(solo) < len(entries) // 4  # the lanes carry most of the corpus
    for name in solo:
        entry = ENTRIES[name]
        text = adversarial.render(entry.path)
        assert entry.follow_up or entry.seeded_cache or "kevin-adversarial-" in text or entry.honest


@pytest.mark.slow
def test_lanes_give_the_verdicts_one_at_a_time_gives_and_leave_the_cache_alone(runs, tmp_path, monkeypatch):
    """main(--lanes 2): two lane candidates at once (a cheat, an honest one) and the escaped daemon
    alone after them; each row as its Expect line says, the daemon's side effect seen in its solo
    run, the lanes' rows marked, nothing left behind, no cached baseline written by the lanes."""
    real_config = adversarial.kevin_config

    def fast_config(backend, root, lock_dir, **changes):  # the tests' short timing
        return real_config(backend, root, lock_dir, **{"timing": FAST_TIMING, "limits": TEST_LIMITS, **changes})

    monkeypatch.setattr(adversarial, "kevin_config", fast_config)
    real_evaluate, cached = adversarial.evaluate, {}

    def recording_evaluate(task, source, config):
        cached.setdefault(task.id, set()).add(config.baseline_cache)
        return real_evaluate(task, source, config)

    monkeypatch.setattr(adversarial, "evaluate", recording_evaluate)
    cheat = next(name for name in CHEATS if ENTRIES[name].expect.gate and not adversarial.needs_solo(ENTRIES[name], list(ENTRIES.values())))
    names = [cheat, "honest_row_mean", "abuse_escaped_daemon"]
    argv = ["--backend", "cpp", "--only", ",".join(names), "--lanes", "2", "--no-cost"]
    assert adversarial.main([*argv, "--out", str(tmp_path), "--cache", str(CACHE)]) == 0
    import json

    report = json.loads((tmp_path / "adversarial_cpu.json").read_text())
    rows = {row["candidate"]: row for row in report["rows"]}
    assert [row["candidate"] for row in report["rows"]] == [n for n in ENTRIES if n in names]  # corpus order
    assert rows[cheat]["lane"] and rows["honest_row_mean"]["lane"] and not rows["abuse_escaped_daemon"]["lane"]
    assert rows[cheat]["outcome_default"] == "caught" and rows[cheat]["expect_unmet"] == ""
    assert rows["honest_row_mean"]["outcome_default"] == "accepted"
    assert rows["abuse_escaped_daemon"]["outcome_default"] == "caught"
    assert adversarial.side_effects({}, CACHE) == {}
    # the lanes time every baseline afresh and write none; the solo run uses the (emptied) cache
    lane_tasks = {adversarial.problem_task(ENTRIES[n].problem).id for n in (cheat, "honest_row_mean")}
    solo_task = adversarial.problem_task(ENTRIES["abuse_escaped_daemon"].problem).id
    assert all(cached[t] == {False} for t in lane_tasks - {solo_task}), cached
    assert True in cached[solo_task]


def test_a_verdict_blamed_on_the_infrastructure_is_asked_again(monkeypatch):
    """A fresh-clone CI run of session 29 failed three cheats' checks on the busy 2-core host: the
    honest twin's (or the reference's) timing stayed dispersed, a verdict about the host that read as
    the cheat's gain. Such verdicts are evaluated again, as the trainer drops them."""
    from kevin.evaluator.result import EvalResult

    busy = EvalResult(stage="runtime", blame="infrastructure", error="the host was busy")
    fine = EvalResult(stage="ok", compiled=True, correct=True, speedup=1.1)
    answers = iter([busy, fine, busy, busy])
    monkeypatch.setattr(adversarial, "evaluate", lambda task, source, config: next(answers))
    first = adversarial.judged(None, "", None)
    assert first.stage == "ok" and first.checks["infrastructure_retries"] == 1
    second = adversarial.judged(None, "", None)  # asked again once, then the host's verdict stands
    assert second.blame == "infrastructure" and second.checks["infrastructure_retries"] == 1
