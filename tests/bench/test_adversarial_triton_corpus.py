"""The Triton part of the adversarial corpus (bench/adversarial/*_triton.py), checked on a CPU, fast.

Nothing runs here (the GPU session runs `python bench/adversarial.py --backend triton`). What is held:
the entries parse (well-formed `Expect:` lines naming real rules, an honest `Honest-twin:` where
`twin` is expected), their problems exist, the bundled honest Triton candidates join the corpus only
where they exist, and the static gate says on every entry exactly what its `gate=` names.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import adversarial  # noqa: E402

from kevin.gate import check_source  # noqa: E402

ENTRIES = {e.name: e for e in adversarial.load_corpus("triton")}
OWN = sorted(name for name in ENTRIES if not name.startswith("bundled_"))


def test_the_triton_corpus_has_cheats_an_honest_twin_and_the_bundled_candidates():
    cheats = [n for n in OWN if not ENTRIES[n].honest]
    assert len(cheats) >= 3 and any(ENTRIES[n].honest for n in OWN)
    bundled = [e for name, e in ENTRIES.items() if name.startswith("bundled_")]
    assert bundled and all(e.path.is_file() for e in bundled)
    assert all(e.backend == "triton" for e in ENTRIES.values())
    assert not any(e.backend == "triton" for e in adversarial.load_corpus("cuda"))


@pytest.mark.parametrize("name", OWN)
def test_each_entry_is_well_formed_and_the_gate_says_what_expect_names(name):
    entry = ENTRIES[name]
    if adversarial.TWIN in entry.expect.dynamic:
        assert ENTRIES[entry.twin].honest and ENTRIES[entry.twin].problem == entry.problem
    assert (adversarial.PROBLEMS / f"{entry.problem}.py").exists(), entry.problem
    report = check_source(adversarial.render(entry.path), "triton")
    rules = sorted({v.rule for v in report.violations})
    if entry.honest:
        assert report.ok, (name, rules)
    else:
        assert rules == sorted(entry.expect.gate), (name, report.summary())
        marked = [i for i, line in enumerate(entry.path.read_text().splitlines(), 1) if "# <-- cheat" in line]
        assert any(v.line in marked for v in report.violations), (name, report.summary())
