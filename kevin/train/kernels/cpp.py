"""C++ writers of the corpus, for the CPU back end (CPU tests of the whole path): a fused loop, a
loop per op, a column-major walk, online softmax; the same kinds of bugs as the CUDA ones."""

from __future__ import annotations

from kevin.train.family import TaskSpec
from kevin.train.kernels.common import (
    REDUCE_COMBINE,
    REDUCE_INIT,
    Variant,
    constants_decl,
    elementwise_fn,
    final,
    host_start,
    op_exprs,
    variant,
)
from kevin.train.kernels.slips import slip_shows

# ---------------------------------------------------------------------------------------------
# C++ (the CPU back end)


def _cpp_pointers(spec: TaskSpec) -> list[str]:
    return [f"    const float* {name}p = {name}.data_ptr<float>();" for name in spec.inputs]


def _cpp_elementwise_code(spec: TaskSpec, *, split: bool, bound: str = "n", slip: bool = False) -> str:
    value = "xp[i] + rp[i]" if spec.kind == "residual" else "xp[i]"
    lines = [
        *host_start(spec, False),
        "    auto y = torch::empty_like(x);",
        *_cpp_pointers(spec),
    ]
    lines += ["    float* yp = y.data_ptr<float>();", "    const int64_t n = x.numel();"]
    if not split:
        lines.append(f"    for (int64_t i = 0; i < {bound}; ++i) yp[i] = f({value});")
    else:
        lines.append(f"    for (int64_t i = 0; i < n; ++i) yp[i] = {value};")
        for expr in op_exprs(spec):
            expr = expr.replace("v", "yp[i]")
            lines.append(f"    for (int64_t i = 0; i < n; ++i) yp[i] = {expr};")
    body = "\n".join([*lines, "    return y;", "}", ""])
    return (constants_decl(spec, False) if split else elementwise_fn(spec, False, slip=slip) + "\n") + body


def elementwise(spec: TaskSpec) -> list[Variant]:
    def make(name, label, how, **options):
        fused = not options.get("split", False)
        return variant(spec, False, name, label, how, _cpp_elementwise_code(spec, **options), fused=fused)

    out = [make("loop", "honest", "one loop over the elements", split=False)]
    if len(spec.ops) + (spec.kind == "residual") > 1:
        out.append(make("split", "slow", "one loop per op", split=True))
    out.append(make("wrong_bound", "wrong", "one loop over the elements", split=False, bound="n - 1"))
    if slip_shows(spec, large=False):
        out.append(make("wrong_slip", "wrong", "one loop over the elements", split=False, slip=True))
    return out


def _cpp_row_code(
    spec: TaskSpec, *, body: list[str], out_shape: str, slip: bool = False, helpers: str = ""
) -> str:
    lines = [
        *host_start(spec, False),
        "    const int64_t rows = x.size(0), cols = x.size(1);",
        f"    auto y = torch::empty({out_shape}, x.options());",
        "    const float* xp = x.data_ptr<float>();",
        "    float* yp = y.data_ptr<float>();",
        *body,
        "    return y;",
        "}",
        "",
    ]
    return elementwise_fn(spec, False, slip=slip) + helpers + "\n" + "\n".join(lines)


def rowreduce(spec: TaskSpec) -> list[Variant]:
    init = REDUCE_INIT[spec.reduce]
    helpers = f"\nstatic inline float combine(float a, float b) {{ return {REDUCE_COMBINE[spec.reduce]}; }}\n"

    def rows_first(bound="cols"):
        return [
            "    for (int64_t r = 0; r < rows; ++r) {",
            f"        float acc = {init};",
            f"        for (int64_t c = 0; c < {bound}; ++c) acc = combine(acc, f(xp[r * cols + c]));",
            f"        yp[r] = {final(spec, 'acc')};",
            "    }",
        ]

    columns_first = [
        f"    for (int64_t r = 0; r < rows; ++r) yp[r] = {init};",
        "    for (int64_t c = 0; c < cols; ++c)",
        "        for (int64_t r = 0; r < rows; ++r) yp[r] = combine(yp[r], f(xp[r * cols + c]));",
    ]
    if spec.reduce == "mean":
        columns_first.append("    for (int64_t r = 0; r < rows; ++r) yp[r] /= (float)cols;")

    def make(name, label, how, body, slip=False):
        code = _cpp_row_code(spec, body=body, out_shape="{rows}", slip=slip, helpers=helpers)
        return variant(spec, False, name, label, how, code)

    out = [make("rows", "honest", "one pass per row", rows_first())]
    out.append(make("columns", "slow", "a column-major walk over the matrix", columns_first))
    out.append(make("wrong_bound", "wrong", "one pass per row", rows_first("cols - 1")))
    if slip_shows(spec, large=False):
        out.append(make("wrong_slip", "wrong", "one pass per row", rows_first(), slip=True))
    return out


def softmax(spec: TaskSpec) -> list[Variant]:
    head = [
        "    for (int64_t r = 0; r < rows; ++r) {",
        "        const float* row = xp + r * cols;",
        "        float* out = yp + r * cols;",
    ]

    def three_pass(bound="cols"):
        return head + [
            "        float m = -INFINITY;",
            "        for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, f(row[c]));",
            "        float s = 0.0f;",
            "        for (int64_t c = 0; c < cols; ++c) s += expf(f(row[c]) - m);",
            f"        for (int64_t c = 0; c < {bound}; ++c) out[c] = expf(f(row[c]) - m) / s;",
            "    }",
        ]

    online = head + [
        "        float m = -INFINITY, s = 0.0f;",
        "        for (int64_t c = 0; c < cols; ++c) {",
        "            float v = f(row[c]);",
        "            if (v > m) {",
        "                s = s * expf(m - v) + 1.0f;",
        "                m = v;",
        "            } else {",
        "                s += expf(v - m);",
        "            }",
        "        }",
        "        for (int64_t c = 0; c < cols; ++c) out[c] = expf(f(row[c]) - m) / s;",
        "    }",
    ]

    def make(name, label, how, body, slip=False):
        code = _cpp_row_code(spec, body=body, out_shape="{rows, cols}", slip=slip)
        return variant(spec, False, name, label, how, code)

    out = [
        make("three_pass", "honest", "three passes per row", three_pass()),
        make("online", "honest", "an online max and sum per row, then the write", online),
        make("wrong_bound", "wrong", "three passes per row", three_pass("cols - 1")),
    ]
    if slip_shows(spec, large=False):
        out.append(make("wrong_slip", "wrong", "three passes per row", three_pass(), slip=True))
    return out
