"""The CUDA half of the adversarial corpus (bench/adversarial/*_cuda.py), checked on a CPU, fast.

Nothing is built or run here (bench/adversarial_cuda_compile.py compiles the sources; the GPU
session runs `python bench/adversarial.py --backend cuda`). What is held:

- size: at least 24 cheats covering all eight families of DESIGN.md §4, at least 3 of them library
  work behind a token kernel, and at least 12 honest candidates;
- every entry's docstring has a well-formed `Expect:` line (`gate=<rule>[,<rule>...]|none
  dynamic=<token>[|<token>...]` for a cheat, `pass` for an honest one) naming real gate rules and
  real stages or blocking flags, and an `Honest-twin:` where it expects `twin`;
- every `Problem:` exists (bench/adversarial/problems/ or a bundled task);
- the static gate says on every rendered entry exactly what its `gate=` names (honest: it passes);
- every entry renders with no placeholder left and its shared builds use one load_inline line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import adversarial  # noqa: E402

from kevin.gate import check_source  # noqa: E402

ENTRIES = {e.name: e for e in adversarial.load_corpus("cuda")}
OWN = {name: e for name, e in ENTRIES.items() if not name.startswith("bundled_")}
CHEATS = sorted(name for name, e in ENTRIES.items() if not e.honest)
HONEST = sorted(name for name, e in ENTRIES.items() if e.honest)


def test_the_corpus_has_24_cheats_over_every_family_and_12_honest():
    families = {ENTRIES[name].family for name in CHEATS}
    assert len(CHEATS) >= 24, CHEATS
    assert families == {str(f) for f in range(1, 9)}, families
    assert len([n for n in HONEST if not n.startswith("bundled_")]) >= 12, HONEST


def test_at_least_three_cheats_are_library_work_behind_a_token_kernel():
    token = [n for n in OWN if "_ext.touch(" in adversarial.render(ENTRIES[n].path)]
    token += [n for n in OWN if "token_kernel<<<" in ENTRIES[n].path.read_text()]
    library = [n for n in set(token) if ENTRIES[n].family == "1"]
    assert len(library) >= 3, library


@pytest.mark.parametrize("name", sorted(OWN))
def test_expect_is_well_formed(name):
    # load_corpus parsed every Expect line (adversarial.parse_expect: format, known rules and tokens,
    # no cheat expecting to pass, a twin where `twin` is expected); here, what it says per entry.
    entry = ENTRIES[name]
    assert entry.expect.passes == entry.honest, f"{name}: honest entries, and only they, expect 'pass'"
    if adversarial.TWIN in entry.expect.dynamic:
        twin = entry.twin
        assert twin in ENTRIES and ENTRIES[twin].honest, f"{name}: 'twin' needs an honest Honest-twin"
        assert ENTRIES[twin].problem == entry.problem


@pytest.mark.parametrize("name", sorted(OWN))
def test_the_problem_exists(name):
    problem = ENTRIES[name].problem
    if problem.startswith("bundled:"):
        assert (adversarial.BUNDLED / "tasks" / f"{problem.split(':', 1)[1]}.py").exists()
    else:
        assert (adversarial.PROBLEMS / f"{problem}.py").exists(), problem


@pytest.mark.parametrize("name", sorted(OWN))
def test_the_gate_says_what_expect_names(name):
    source = adversarial.render(ENTRIES[name].path)
    assert not adversarial.PLACEHOLDER.search(source), f"{name}: a placeholder is left after rendering"
    report = check_source(source, "cuda")
    rules = sorted({v.rule for v in report.violations})
    if ENTRIES[name].honest:
        assert report.ok, (name, rules)
    else:
        assert rules == sorted(ENTRIES[name].expect.gate), (name, rules)


def test_a_shared_build_has_one_load_inline_line():
    calls: dict[str, set[str]] = {}
    for entry in OWN.values():
        for line in entry.path.read_text().splitlines():
            if line.startswith("_ext = load_inline(name="):
                calls.setdefault(line.split('"')[1], set()).add(line)
    assert calls and all(len(lines) == 1 for lines in calls.values()), calls
