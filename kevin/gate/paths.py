"""Does every way through forward launch a custom kernel? The path analysis behind rule `fallback`.

`Paths(gate).exits(forward)` follows forward's statements and lists every way out (a `return`, or the
end of the body) with whether a kernel launch is certain on the way there and, when it is not, the line
of a branch that skipped one. A call launches when the compute-path scan recorded it as a kernel call
(`gate.kernel_calls`) or when it calls a function on whose every path one runs (`gate.call_targets`,
followed recursively; a recursive call is taken not to launch). Branches of `if`, `match`, `try` and
conditional expressions are merged, as are the operands of `and`/`or` after the first: a launch counts
only when every branch makes one.

What it does not do: evaluate conditions (`if False:` is a branch like any other) or count iterations
(loops are assumed to run, so a kernel launched only inside `for _ in range(self.n)` counts as launched);
raising is not a way out, so a path that ends in `raise` needs no kernel.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from kevin.gate.names import SCOPES

if TYPE_CHECKING:
    from kevin.gate.rules import Gate

_TRY_NODES = tuple({ast.Try, getattr(ast, "TryStar", ast.Try)})


class Paths:
    """Does every way through a function launch a custom kernel? Loops are assumed to run; raising is
    not a way out; a call launches when it calls a kernel or a function on whose every path one runs."""

    def __init__(self, gate: Gate):
        self.gate = gate
        self.memo: dict[tuple, tuple[bool, int | None]] = {}
        self.may_memo: dict[tuple, bool] = {}

    def must(self, key: tuple) -> tuple[bool, int | None]:
        if key not in self.memo:
            self.memo[key] = (False, None)  # recursion: assume it does not launch
            bad = [e for e in self.exits(self.gate.keys[key][0]) if not e[1]]
            self.memo[key] = (not bad, bad[0][0] if bad else None)
        return self.memo[key]

    def may(self, key: tuple) -> bool:
        if key not in self.may_memo:
            self.may_memo[key] = False
            calls = [n for n in ast.walk(self.gate.keys[key][0]) if isinstance(n, ast.Call)]
            self.may_memo[key] = any(id(c) in self.gate.kernel_calls for c in calls) or any(
                self.may(k) for c in calls for k in self.gate.call_targets.get(id(c), ())
            )
        return self.may_memo[key]

    def exits(self, fn: ast.AST) -> list[tuple[int, bool, int | None]]:
        out: list[tuple[int, bool, int | None]] = []
        if isinstance(fn, ast.Lambda):
            launched, skip = self.expr(fn.body)
            return [(fn.lineno, launched, skip)]
        end = self.block(fn.body, (False, None), out)  # type: ignore[attr-defined]
        if end is not None:
            out.append((fn.body[-1].end_lineno or fn.lineno, end[0], end[1]))  # type: ignore[attr-defined]
        return out

    def block(self, body: list[ast.stmt], state, out) -> tuple[bool, int | None] | None:
        for st in body:
            if state is None:
                break
            state = self.stmt(st, state, out)
        return state

    @staticmethod
    def merge(a, b, line: int):
        if a is None or b is None:
            return b if a is None else a
        return (a[0] and b[0], a[1] or b[1] or (line if a[0] != b[0] else None))

    def stmt(self, st: ast.stmt, state, out):
        launched, skip = state

        def after(*nodes: ast.AST | None):
            found = [self.expr(n) for n in nodes if n is not None]
            return (launched or any(f[0] for f in found), skip or next((f[1] for f in found if f[1]), None))

        if isinstance(st, ast.Return):
            l_, s_ = after(st.value)
            out.append((st.lineno, l_, s_))
            return None
        if isinstance(st, ast.Raise):
            return None
        if isinstance(st, ast.If):
            start = after(st.test)
            return self.merge(self.block(st.body, start, out), self.block(st.orelse, start, out), st.lineno)
        if isinstance(st, (ast.For, ast.AsyncFor, ast.While)):
            start = after(getattr(st, "iter", None) or getattr(st, "test", None))
            looped = self.block(st.body, start, out)
            return self.block(st.orelse, looped if looped is not None else start, out)
        if isinstance(st, _TRY_NODES):
            body = self.block(st.orelse, self.block(st.body, state, out), out)
            for handler in st.handlers:
                body = self.merge(body, self.block(handler.body, state, out), st.lineno)
            return self.block(st.finalbody, body, out) if body is not None else None
        if isinstance(st, (ast.With, ast.AsyncWith)):
            return self.block(st.body, after(*[i.context_expr for i in st.items]), out)
        if isinstance(st, ast.Match):
            start, result = after(st.subject), None
            for case in st.cases:
                result = self.merge(result, self.block(case.body, start, out), st.lineno)
            irrefutable = any(
                isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None and c.guard is None
                for c in st.cases
            )
            return result if irrefutable else self.merge(result, start, st.lineno)
        if isinstance(st, (*SCOPES, ast.Import, ast.ImportFrom, ast.Pass, ast.Global, ast.Nonlocal)):
            return state
        return after(*[c for c in ast.iter_child_nodes(st) if not isinstance(c, ast.stmt)])

    def expr(self, node: ast.AST) -> tuple[bool, int | None]:
        if isinstance(node, ast.Lambda):
            return (False, None)
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test)
            if test[0]:
                return test
            a, b = self.expr(node.body), self.expr(node.orelse)
            if a[0] and b[0]:
                return (True, None)
            return (False, a[1] or b[1] or (node.lineno if a[0] or b[0] else None))
        if isinstance(node, ast.BoolOp):
            first = self.expr(node.values[0])
            if first[0]:
                return first
            rest = [self.expr(v) for v in node.values[1:]]
            return (
                False,
                first[1]
                or next((r[1] for r in rest if r[1]), None)
                or (node.lineno if any(r[0] for r in rest) else None),
            )
        launched, skip = False, None
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt):
                found = self.expr(child)
                launched, skip = launched or found[0], skip or found[1]
        if isinstance(node, ast.Call):
            if id(node) in self.gate.kernel_calls:
                return (True, skip)
            for key in self.gate.call_targets.get(id(node), ()):
                must, line = self.must(key)
                if must:
                    launched = True
                elif skip is None and line is not None and self.may(key):
                    skip = line
        return (launched, skip)
