"""`check_source` / `check_file` and `kevin check`: the gate's entry points.

`check_source(source, backend, policy)` parses a candidate (never imports or runs it) and runs
`kevin.gate.rules.Gate` over it; `kevin check CANDIDATE [--backend cuda|triton|cpp] [--json]` prints
the report and exits 1 when the candidate is rejected, 2 on bad usage.

The gate fails closed: the rules (and the name tables, C++ reader and path analysis they load) are
imported when a candidate is checked, and if they cannot load or raise while checking, the
candidate is rejected with the `gate-error` rule, whose report blames the infrastructure. A broken
gate must never wave a candidate through to the reward.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from kevin.errors import UsageError
from kevin.gate.policy import BACKENDS, DEFAULT_POLICY, CheckPolicy, CheckReport, Violation


def check_source(source: str, backend: str = "cuda", policy: CheckPolicy | None = None) -> CheckReport:
    """Run the static gate on a candidate's source. Never raises for a bad candidate (a source that
    does not parse is a `syntax` violation) nor for a broken gate (a `gate-error` violation); raises
    UsageError for an unknown back end."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    policy = policy or DEFAULT_POLICY
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return CheckReport(backend, (Violation("syntax", exc.lineno or 0, f"does not parse: {exc.msg}"),))
    except (ValueError, RecursionError) as exc:
        return CheckReport(backend, (Violation("syntax", 0, f"does not parse: {exc}"),))
    try:
        found = _load_gate()(tree, policy, backend).run()
    except RecursionError:
        found = [Violation("syntax", 0, "nested too deeply to analyse; simplify the candidate")]
    except Exception as exc:  # a bug or a broken install on our side: reject, never pass
        reason = f"{type(exc).__name__}: {exc}"[:300]
        message = f"the static gate failed ({reason}); this is kevin's fault, not the candidate's"
        return CheckReport(backend, (Violation("gate-error", 0, message),))
    unique: dict[tuple[str, int], Violation] = {}
    for violation in found:
        unique.setdefault((violation.rule, violation.line), violation)
    return CheckReport(backend, tuple(sorted(unique.values(), key=lambda v: (v.line, v.rule))))


def _load_gate() -> type:
    """The rule engine, imported when a candidate is checked so that a failure to load it is a
    rejection (`gate-error`) instead of an import error that leaves callers without a gate."""
    from kevin.gate.rules import Gate

    return Gate


def check_file(path: str | Path, backend: str = "cuda", policy: CheckPolicy | None = None) -> CheckReport:
    """`check_source` on a file; UsageError when it cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"candidate file not found: {path} (pass the path of a .py file)")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read candidate {path}: {exc}") from exc
    return check_source(source, backend, policy)


# ---------------------------------------------------------------------------------------------------
# The command.


def register_commands(subparsers) -> None:
    parser = subparsers.add_parser(
        "check",
        help="static gate: does a candidate write its own kernel? (exit 1 when rejected)",
        description="Read a candidate (never run it) and reject framework compute, fallbacks, use of the "
        "reference, and missing or unused custom kernels. Exit 0 accepted, 1 rejected, 2 bad usage.",
    )
    parser.add_argument("candidate", metavar="CANDIDATE", help="path of the candidate source (.py)")
    parser.add_argument("--backend", choices=BACKENDS, default="cuda", help="kernel back end (default: cuda)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(run=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    report = check_file(args.candidate, args.backend)
    if args.json:
        print(json.dumps({"candidate": str(args.candidate), **report.to_dict()}))
    else:
        verdict = "accepted" if report.ok else "rejected"
        print(f"{args.candidate}: {verdict} (backend {report.backend})", file=sys.stdout)
        for v in report.violations:
            print(f"  line {v.line}: [{v.rule}] {v.message}")
    return 0 if report.ok else 1
