"""What counts as caught in the adversarial corpus: an entry's `Expect:` line (which defence must
stop it) and the twin rule (a cheat that passes no faster than its honest twin gained nothing).
Split from bench/adversarial.py, which runs the corpus; both it and the tests read these."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin.evaluator.result import BLOCKING_FLAGS, STAGES
from kevin.gate import RULES

TWIN_MARGIN = 2.0
"""A cheat with an honest twin gains nothing when its speedup is within this factor of the twin's
(the tricks this is for were 100x faster than their twins before kevin took their gain away)."""

TWIN_FLOOR_MS = {"cpp": 0.5}
"""The shortest twin call (its `runtime_ms`) whose speedup may stand for the cheat's, by back end. On
the CPU each call is signalled through a socket whose wake-ups wander 0.03-0.11 ms; a twin near that
(scale_relu_rand at 256 x 1024: 0.05 ms of work, timed at 0.12-0.20 ms) read 0.75x to 2.44x in six
runs on an idle host, and a fresh-clone CI run of session 34 failed a cheat at 2.7x against its twin's
1.3x. A twin under the floor shows nothing, so the cheat counts as having gained. The GPU back ends
spin (microseconds of jitter): no floor."""


EXPECT_FORMAT = (
    "'Expect: gate=<rule>[,<rule>...]|none dynamic=<token>[|<token>...]' for a cheat, "
    "'Expect: pass' for an honest candidate"
)
TWIN = "twin"
DYNAMIC_TOKENS = frozenset(STAGES) - {"ok", "format", "static_check"} | BLOCKING_FLAGS | {TWIN}
"""What a cheat's `dynamic=` may name: a stage that stops it, a blocking flag, or `twin` (passed with
no gain over its honest twin)."""


@dataclass(frozen=True)
class Expect:
    """Which defence must catch a corpus entry (its docstring's `Expect:` line, EXPECT_FORMAT).

    `gate`: the static-gate rule ids the default run must report (stage static_check); empty when the
    gate lets the cheat through, and then the default run must show `dynamic` too. `dynamic`: what the
    run with static_check=False must show, one of these tokens: a token matches the result's stage, a
    flag's name before any ':' (`timed_output_mismatch` matches `timed_output_mismatch:sampled`), or
    is `twin` (passed, no gain over the honest twin). Both empty: an honest candidate, which must pass
    with no flag."""

    gate: tuple[str, ...] = ()
    dynamic: tuple[str, ...] = ()

    @property
    def passes(self) -> bool:
        return not self.dynamic

    def unmet(self, kevin: dict[str, Any], static_check: bool) -> str:
        """Why `kevin` (a `result_summary`, from a run with or without the gate) is not what this
        entry expects; empty when it is."""
        if self.passes:
            return "" if kevin["passed"] and not kevin["flags"] else "expected to pass with no flag"
        if static_check and self.gate:
            missing = sorted(set(self.gate) - set(kevin["rules"]))
            if kevin["stage"] == "static_check" and not missing:
                return ""
            return f"expected the static gate to report {', '.join(missing or self.gate)}"
        if kevin["stage"] != "static_check" and any(shows(kevin, token) for token in self.dynamic):
            return ""
        return f"expected the dynamic checks to show {' or '.join(self.dynamic)}"


def shows(kevin: dict[str, Any], token: str) -> bool:
    """Whether a run's summary shows an `Expect` dynamic token."""
    if token == TWIN:
        return bool(kevin["passed"] and kevin.get("twin")) and not gained(kevin)
    return token == kevin["stage"] or token in {flag.split(":", 1)[0] for flag in kevin["flags"]}


def parse_expect(text: str, path: Path) -> Expect:
    """The `Expect:` line's value; ValueError naming the file and the format when it is malformed."""
    if text == "pass":
        return Expect()
    found = re.fullmatch(r"gate=(\S+)\s+dynamic=(\S+)", text)
    if not found:
        raise ValueError(f"{path}: malformed 'Expect: {text}'; write {EXPECT_FORMAT}")
    gate = () if found.group(1) == "none" else tuple(found.group(1).split(","))
    dynamic = tuple(found.group(2).split("|"))
    unknown = [rule for rule in gate if rule not in RULES] + [t for t in dynamic if t not in DYNAMIC_TOKENS]
    if unknown:
        raise ValueError(
            f"{path}: 'Expect: {text}' names {', '.join(unknown)}, which is neither a gate rule "
            f"({', '.join(sorted(RULES))}) nor a dynamic token ({', '.join(sorted(DYNAMIC_TOKENS))})"
        )
    return Expect(gate, dynamic)


def gained(kevin: dict[str, Any]) -> bool:
    """Whether a cheat earned anything: passed, and (with an honest twin timed long enough to compare
    with, `comparable`) faster than the twin by more than TWIN_MARGIN."""
    if not kevin["passed"]:
        return False
    twin = kevin.get("twin") or {}
    if not (twin.get("passed") and twin.get("speedup") and kevin.get("speedup") and comparable(twin)):
        return True
    return kevin["speedup"] > TWIN_MARGIN * twin["speedup"]


def comparable(twin: dict[str, Any]) -> bool:
    """Whether a twin's verdict (run_kevin's `twin`: backend, runtime_ms) was timed above its back
    end's TWIN_FLOOR_MS."""
    floor_ms = TWIN_FLOOR_MS.get(twin.get("backend", ""), 0.0)
    return not floor_ms or (twin.get("runtime_ms") or 0.0) >= floor_ms
