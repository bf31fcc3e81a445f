"""CUDA writers of the corpus (see kevin.train.kernels for the labels).

act, residual   threads per block (128-1024) x access (one element per thread, grid-stride,
                float4, float4 grid-stride); slow: one kernel per op, 16 consecutive elements per
                thread (uncoalesced), 16 blocks; wrong: a grid sized for a quarter of the
                elements, the last element skipped, a slipped constant
rowreduce       shared-memory tree or warp shuffle per block (128-1024 threads), a warp per row,
                float4 loads; slow: a thread per row, the ops in a kernel of their own; wrong:
                the tree without __syncthreads, a shuffle starting at offset 8, the last column
                skipped, a slipped constant
softmax         a block per row with three passes or an online max/sum, a warp per row online;
                slow: a thread per row, the ops in a kernel of their own; wrong: a shuffle from
                offset 8, a missing __syncthreads between the two block reductions, the last
                column left unwritten, a slipped constant
"""

from __future__ import annotations

from kevin.train.family import TaskSpec
from kevin.train.kernels.common import (
    REDUCE_COMBINE,
    REDUCE_INIT,
    STREAM,
    Variant,
    constants_decl,
    elementwise_fn,
    final,
    host_start,
    op_exprs,
    threads_words,
    variant,
)
from kevin.train.kernels.slips import slip_shows

# ---------------------------------------------------------------------------------------------
# CUDA: elementwise chains (act, residual)

ACCESS_WORDS = {
    "one": "one element per thread",
    "grid": "a grid-stride loop over at most 2048 blocks",
    "vec4": "float4 loads and stores, one float4 per thread",
    "vec4_grid": "float4 loads and stores in a grid-stride loop",
    "chunk16": "16 consecutive elements per thread",
    "few": "a grid-stride loop over 16 blocks",
}
FIRST_INDEX = "(int64_t)blockIdx.x * blockDim.x + threadIdx.x"


def _ewparams(spec: TaskSpec, vec: bool) -> str:
    kind = "float4" if vec else "float"
    inputs = [f"const {kind}* __restrict__ {name}" for name in spec.inputs]
    return ", ".join([*inputs, f"{kind}* __restrict__ y", "int64_t n"])


def _ew_body(spec: TaskSpec, vec: bool) -> str:
    """The work of one index `i`."""
    residual = spec.kind == "residual"
    if not vec:
        return "y[i] = f(x[i] + r[i]);" if residual else "y[i] = f(x[i]);"
    loads = "float4 a = x[i];" + (" float4 b = r[i];" if residual else "")
    lanes = " ".join(
        f"a.{lane} = f(a.{lane} + b.{lane});" if residual else f"a.{lane} = f(a.{lane});" for lane in "xyzw"
    )
    return f"{loads}\n        {lanes}\n        y[i] = a;"


def _ew_kernel(spec: TaskSpec, access: str, *, bound: str = "n") -> str:
    vec = access.startswith("vec4")
    head = f"__global__ void fused_kernel({_ewparams(spec, vec)}) {{"
    body = _ew_body(spec, vec)
    if access in ("grid", "vec4_grid", "few"):
        loop = f"for (int64_t i = {FIRST_INDEX}; i < {bound}; i += (int64_t)gridDim.x * blockDim.x)"
        return f"{head}\n    {loop} {{\n        {body}\n    }}\n}}\n"
    if access == "chunk16":
        start = f"int64_t start = ({FIRST_INDEX}) * 16;"
        loop = "for (int64_t i = start; i < start + 16 && i < n; ++i)"
        return f"{head}\n    {start}\n    {loop} {{\n        {body}\n    }}\n}}\n"
    return f"{head}\n    int64_t i = {FIRST_INDEX};\n    if (i < {bound}) {{\n        {body}\n    }}\n}}\n"


def _ew_args(spec: TaskSpec, vec: bool) -> str:
    if vec:
        pointers = [f"reinterpret_cast<const float4*>({name}.data_ptr<float>())" for name in spec.inputs]
        return ", ".join([*pointers, "reinterpret_cast<float4*>(y.data_ptr<float>())", "n / 4"])
    return ", ".join([*(f"{name}.data_ptr<float>()" for name in spec.inputs), "y.data_ptr<float>()", "n"])


def _ew_host(spec: TaskSpec, access: str, threads: int, *, blocks: str | None = None) -> str:
    vec = access.startswith("vec4")
    lines = [
        *host_start(spec, True),
        "    auto y = torch::empty_like(x);",
        "    const int64_t n = x.numel();",
    ]
    if vec:
        lines.append('    TORCH_CHECK(n % 4 == 0, "the size must be a multiple of 4");')
    lines.append(f"    const int threads = {threads};")
    work = {"vec4": "n / 4", "vec4_grid": "n / 4", "chunk16": "n / 16"}.get(access, "n")
    if blocks is not None:
        lines.append(f"    const int64_t blocks = {blocks};")
    elif access in ("grid", "vec4_grid"):
        lines.append(f"    int64_t blocks = ({work} + threads - 1) / threads;")
        lines.append("    if (blocks > 2048) blocks = 2048;")
    else:
        lines.append(f"    const int64_t blocks = ({work} + threads - 1) / threads;")
    lines.append(f"    fused_kernel<<<blocks, threads, {STREAM}>>>({_ew_args(spec, vec)});")
    return "\n".join([*lines, "    return y;", "}", ""])


def _ew_split(spec: TaskSpec) -> str:
    """One kernel per op (and one for the residual add): every op reads and writes global memory."""
    steps: list[tuple[str, str, str]] = []  # (kernel, first value, expression of v)
    if spec.kind == "residual":
        steps.append(("add_kernel", "x[i] + r[i]", "v"))
    for (name, _), expr in zip(spec.ops, op_exprs(spec)):
        steps.append((f"{name}_kernel", "y[i]" if steps else "x[i]", expr))
    kernels, launches = [], []
    for index, (kernel, value, expr) in enumerate(steps):
        inputs = spec.inputs if index == 0 else ()
        arguments = [f"const float* __restrict__ {name}" for name in inputs] + ["float* y", "int64_t n"]
        kernels.append(
            f"__global__ void {kernel}({', '.join(arguments)}) {{\n    int64_t i = {FIRST_INDEX};\n"
            f"    if (i < n) {{\n        float v = {value};\n        y[i] = {expr};\n    }}\n}}\n"
        )
        args = [f"{name}.data_ptr<float>()" for name in inputs] + ["y.data_ptr<float>()", "n"]
        launches.append(f"    {kernel}<<<blocks, threads, {STREAM}>>>({', '.join(args)});")
    host = [
        *host_start(spec, True),
        "    auto y = torch::empty_like(x);",
        "    const int64_t n = x.numel();",
        "    const int threads = 256;",
        "    const int64_t blocks = (n + threads - 1) / threads;",
        *launches,
        "    return y;",
        "}",
        "",
    ]
    return constants_decl(spec, True) + "\n".join(kernels) + "\n" + "\n".join(host)


def elementwise(spec: TaskSpec) -> list[Variant]:
    fn = elementwise_fn(spec, True)

    def make(name, label, access, threads, *, fn=fn, bound="n", blocks=None, words=None):
        code = (
            fn
            + "\n"
            + _ew_kernel(spec, access, bound=bound)
            + "\n"
            + _ew_host(spec, access, threads, blocks=blocks)
        )
        how = f"{words or ACCESS_WORDS[access]}, {threads_words(threads)}"
        return variant(spec, True, name, label, how, code)

    out = [
        make(f"{access}_t{threads}", "honest", access, threads)
        for access in ("one", "grid", "vec4", "vec4_grid")
        for threads in (128, 256, 512, 1024)
    ]
    if len(spec.ops) + (spec.kind == "residual") > 1:
        how = f"{ACCESS_WORDS['one']}, {threads_words(256)}"
        out.append(variant(spec, True, "split_t256", "slow", how, _ew_split(spec), fused=False))
    out.append(make("chunk16_t256", "slow", "chunk16", 256))
    out.append(make("few_t256", "slow", "few", 256, blocks="16"))
    out.append(make("wrong_quarter", "wrong", "one", 256, blocks="(n / 4 + threads - 1) / threads"))
    out.append(make("wrong_bound", "wrong", "one", 256, bound="n - 1"))
    if slip_shows(spec, large=True):
        out.append(make("wrong_slip", "wrong", "vec4", 256, fn=elementwise_fn(spec, True, slip=True)))
    return out


# ---------------------------------------------------------------------------------------------
# CUDA: row reductions

ROW_PARAMS = "const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols"


def _warp_fn(name: str, combine: str, start: int = 16) -> str:
    return (
        f"__device__ __forceinline__ float {name}(float v) {{\n"
        f"    for (int o = {start}; o > 0; o >>= 1) v = {combine};\n    return v;\n}}\n"
    )


def _row_loop(first: str, step: str, statement: str, *, vec: bool = False, bound: str = "cols") -> str:
    """A loop over one row's columns (float4 lanes when `vec`); `statement` uses `{v}` per value."""
    if not vec:
        return f"for (int64_t c = {first}; c < {bound}; c += {step}) {statement.format(v='row[c]')}"
    lanes = " ".join(statement.format(v=f"a.{lane}") for lane in "xyzw")
    return (
        f"for (int64_t c = {first}; c < cols / 4; c += {step}) {{\n"
        f"        float4 a = reinterpret_cast<const float4*>(row)[c];\n        {lanes}\n    }}"
    )


def _reduce_prelude(spec: TaskSpec, fn: str, *, shuffle_start: int = 16) -> str:
    combine = f"__device__ __forceinline__ float combine(float a, float b) {{ return {REDUCE_COMBINE[spec.reduce]}; }}\n"
    warp = _warp_fn("warp_reduce", "combine(v, __shfl_xor_sync(0xffffffff, v, o))", shuffle_start)
    return fn + "\n" + combine + "\n" + warp


def _reduce_kernel(
    spec: TaskSpec, shape: str, threads: int, *, load: str = "f({v})", vec=False, sync=True, bound="cols"
):
    init = REDUCE_INIT[spec.reduce]
    accumulate = f"acc = combine(acc, {load});"
    head = f"__global__ void reduce_kernel({ROW_PARAMS}) {{"
    if shape == "thread":
        loop = _row_loop("0", "1", accumulate, bound=bound).replace("c += 1", "++c")
        lines = [
            f"    int64_t r = {FIRST_INDEX};",
            "    if (r >= rows) return;",
            "    const float* row = x + r * cols;",
            f"    float acc = {init};",
            f"    {loop}",
            f"    y[r] = {final(spec, 'acc')};",
        ]
    elif shape == "warp":
        lines = [
            "    int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;",
            "    int lane = threadIdx.x % 32;",
            "    if (r >= rows) return;",
            "    const float* row = x + r * cols;",
            f"    float acc = {init};",
            f"    {_row_loop('lane', '32', accumulate, vec=vec, bound=bound)}",
            "    acc = warp_reduce(acc);",
            f"    if (lane == 0) y[r] = {final(spec, 'acc')};",
        ]
    else:
        lines = [
            "    const float* row = x + (int64_t)blockIdx.x * cols;",
            f"    float acc = {init};",
            f"    {_row_loop('threadIdx.x', 'blockDim.x', accumulate, vec=vec, bound=bound)}",
        ]
        if shape == "tree":
            lines[:0] = [f"    __shared__ float buf[{threads}];"]
            lines += [
                "    buf[threadIdx.x] = acc;",
                "    __syncthreads();",
                "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {",
                "        if (threadIdx.x < s) buf[threadIdx.x] = combine(buf[threadIdx.x], buf[threadIdx.x + s]);",
                *(["        __syncthreads();"] if sync else []),
                "    }",
                f"    if (threadIdx.x == 0) y[blockIdx.x] = {final(spec, 'buf[0]')};",
            ]
        else:
            lines[:0] = ["    __shared__ float part[32];"]
            lines += [
                "    acc = warp_reduce(acc);",
                "    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;",
                "    if (lane == 0) part[warp] = acc;",
                "    __syncthreads();",
                "    if (warp == 0) {",
                f"        acc = warp_reduce(lane < blockDim.x / 32 ? part[lane] : {init});",
                f"        if (lane == 0) y[blockIdx.x] = {final(spec, 'acc')};",
                "    }",
            ]
    return "\n".join([head, *lines, "}", ""])


def _row_host(
    spec: TaskSpec, kernel: str, shape: str, threads: int, *, out_shape: str, vec: bool, pre: bool = False
) -> str:
    grid = {
        "thread": "(rows + threads - 1) / threads",
        "warp": "(rows + threads / 32 - 1) / (threads / 32)",
    }.get(shape, "rows")
    lines = [
        *host_start(spec, True),
        "    const int64_t rows = x.size(0), cols = x.size(1);",
        f"    auto y = torch::empty({out_shape}, x.options());",
    ]
    if vec:
        lines.append('    TORCH_CHECK(cols % 4 == 0, "the row length must be a multiple of 4");')
    lines.append(f"    const int threads = {threads};")
    source = "x"
    if pre:
        lines += [
            "    auto t = torch::empty_like(x);",
            "    const int64_t n = x.numel();",
            f"    ops_kernel<<<(n + 255) / 256, 256, {STREAM}>>>(x.data_ptr<float>(), t.data_ptr<float>(), n);",
        ]
        source = "t"
    args = f"{source}.data_ptr<float>(), y.data_ptr<float>(), rows, cols"
    lines.append(f"    {kernel}<<<{grid}, threads, {STREAM}>>>({args});")
    return "\n".join([*lines, "    return y;", "}", ""])


OPS_KERNEL = (
    "__global__ void ops_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {\n"
    f"    int64_t i = {FIRST_INDEX};\n    if (i < n) y[i] = f(x[i]);\n}}\n"
)

SHAPE_WORDS = {
    "thread": "one thread per row",
    "warp": "one warp per row with shuffle reductions",
    "tree": "one block per row with a shared-memory tree reduction",
    "shuffle": "one block per row with warp-shuffle reductions",
}


def rowreduce(spec: TaskSpec) -> list[Variant]:
    fn = elementwise_fn(spec, True)

    def make(
        name, label, shape, threads, *, vec=False, fn=fn, shuffle=16, sync=True, bound="cols", pre=False
    ):
        load = "{v}" if pre else "f({v})"
        kernel = _reduce_kernel(spec, shape, threads, load=load, vec=vec, sync=sync, bound=bound)
        prelude = _reduce_prelude(spec, fn, shuffle_start=shuffle) + ("\n" + OPS_KERNEL if pre else "")
        host = _row_host(spec, "reduce_kernel", shape, threads, out_shape="{rows}", vec=vec, pre=pre)
        how = SHAPE_WORDS[shape] + (", float4 loads" if vec else "") + f", {threads_words(threads)}"
        return variant(spec, True, name, label, how, prelude + "\n" + kernel + "\n" + host, fused=not pre)

    out = [make(f"tree_t{t}", "honest", "tree", t) for t in (128, 256, 512)]
    out += [make(f"shuffle_t{t}", "honest", "shuffle", t) for t in (256, 512, 1024)]
    out += [make(f"shuffle_vec4_t{t}", "honest", "shuffle", t, vec=True) for t in (256, 512)]
    out += [make("warp_t256", "honest", "warp", 256), make("warp_vec4_t256", "honest", "warp", 256, vec=True)]
    out.append(make("thread_t128", "slow", "thread", 128))
    if spec.ops:
        out.append(make("split_t256", "slow", "shuffle", 256, pre=True))
    out.append(make("wrong_nosync", "wrong", "tree", 256, sync=False))
    out.append(make("wrong_shuffle", "wrong", "warp", 256, shuffle=8))
    out.append(make("wrong_bound", "wrong", "shuffle", 256, bound="cols - 1"))
    if slip_shows(spec, large=True):
        out.append(make("wrong_slip", "wrong", "shuffle", 256, fn=elementwise_fn(spec, True, slip=True)))
    return out


# ---------------------------------------------------------------------------------------------
# CUDA: softmax over rows

MERGE_FNS = (
    "__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {\n"
    "    float nm = fmaxf(m, om);\n    s = s * expf(m - nm) + os * expf(om - nm);\n    m = nm;\n}\n\n"
    "__device__ __forceinline__ void warp_merge(float& m, float& s) {\n"
    "    for (int o = 16; o > 0; o >>= 1)\n"
    "        merge(m, s, __shfl_xor_sync(0xffffffff, m, o), __shfl_xor_sync(0xffffffff, s, o));\n}\n"
)


def _softmax_kernel(
    shape: str, *, load: str = "f({v})", middle_sync: bool = True, write_bound: str = "cols"
) -> str:
    value = load.format(v="row[c]")
    write = f"out[c] = expf({value} - m) / s;"
    head = f"__global__ void softmax_kernel({ROW_PARAMS}) {{"
    if shape in ("thread", "warp"):
        first, step = ("0", "1") if shape == "thread" else ("lane", "32")
        index = (
            FIRST_INDEX if shape == "thread" else "(int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32"
        )
        lines = [f"    int64_t r = {index};"]
        lines += ["    int lane = threadIdx.x % 32;"] if shape == "warp" else []
        lines += [
            "    if (r >= rows) return;",
            "    const float* row = x + r * cols;",
            "    float* out = y + r * cols;",
        ]
        loop = f"for (int64_t c = {first}; c < {{bound}}; c += {step})".replace("c += 1)", "++c)")
        if shape == "thread":
            lines += [
                "    float m = -INFINITY;",
                f"    {loop.format(bound='cols')} m = fmaxf(m, {value});",
                "    float s = 0.0f;",
                f"    {loop.format(bound='cols')} s += expf({value} - m);",
            ]
        else:
            lines += [
                "    float m = -1e30f, s = 0.0f;",
                f"    {loop.format(bound='cols')} merge(m, s, {value}, 1.0f);",
                "    warp_merge(m, s);",
            ]
        lines.append(f"    {loop.format(bound=write_bound)} {write}")
        return "\n".join([head, *lines, "}", ""])
    loop = "for (int64_t c = threadIdx.x; c < {bound}; c += blockDim.x)"
    lines = [
        "    __shared__ float part[32];" if shape == "block" else "    __shared__ float pm[32], ps[32];",
        "    const float* row = x + (int64_t)blockIdx.x * cols;",
        "    float* out = y + (int64_t)blockIdx.x * cols;",
        "    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;",
    ]
    if shape == "block":
        lines += [
            "    float m = -INFINITY;",
            f"    {loop.format(bound='cols')} m = fmaxf(m, {value});",
            "    m = warp_max(m);",
            "    if (lane == 0) part[warp] = m;",
            "    __syncthreads();",
            "    m = warp_max(lane < warps ? part[lane] : -INFINITY);",
            *(["    __syncthreads();"] if middle_sync else []),
            "    float s = 0.0f;",
            f"    {loop.format(bound='cols')} s += expf({value} - m);",
            "    s = warp_sum(s);",
            "    if (lane == 0) part[warp] = s;",
            "    __syncthreads();",
            "    s = warp_sum(lane < warps ? part[lane] : 0.0f);",
        ]
    else:
        lines += [
            "    float m = -1e30f, s = 0.0f;",
            f"    {loop.format(bound='cols')} merge(m, s, {value}, 1.0f);",
            "    warp_merge(m, s);",
            "    if (lane == 0) {",
            "        pm[warp] = m;",
            "        ps[warp] = s;",
            "    }",
            "    __syncthreads();",
            "    m = lane < warps ? pm[lane] : -1e30f;",
            "    s = lane < warps ? ps[lane] : 0.0f;",
            "    warp_merge(m, s);",
        ]
    lines.append(f"    {loop.format(bound=write_bound)} {write}")
    return "\n".join([head, *lines, "}", ""])


SOFTMAX_WORDS = {
    "thread": "one thread per row, three passes",
    "warp": "one warp per row, an online max and sum in one pass, then the write",
    "block": "one block per row, three passes with warp-shuffle block reductions",
    "online": "one block per row, an online max and sum in one pass, then the write",
}


def softmax(spec: TaskSpec) -> list[Variant]:
    fn = elementwise_fn(spec, True)

    def make(name, label, shape, threads, *, fn=fn, shuffle=16, sync=True, bound="cols", pre=False):
        helpers = fn + "\n"
        if shape == "block":
            helpers += _warp_fn("warp_max", "fmaxf(v, __shfl_xor_sync(0xffffffff, v, o))", shuffle) + "\n"
            helpers += _warp_fn("warp_sum", "v + __shfl_xor_sync(0xffffffff, v, o)", shuffle)
        elif shape in ("warp", "online"):
            helpers += MERGE_FNS
        if pre:
            helpers += "\n" + OPS_KERNEL
        kernel = _softmax_kernel(shape, load="{v}" if pre else "f({v})", middle_sync=sync, write_bound=bound)
        host = _row_host(spec, "softmax_kernel", shape, threads, out_shape="{rows, cols}", vec=False, pre=pre)
        how = f"{SOFTMAX_WORDS[shape]}, {threads_words(threads)}"
        return variant(spec, True, name, label, how, helpers + "\n" + kernel + "\n" + host, fused=not pre)

    out = [make(f"block_t{t}", "honest", "block", t) for t in (128, 256, 512, 1024)]
    out += [make(f"online_t{t}", "honest", "online", t) for t in (256, 512, 1024)]
    out.append(make("warp_t256", "honest", "warp", 256))
    out.append(make("thread_t128", "slow", "thread", 128))
    if spec.ops:
        out.append(make("split_t256", "slow", "warp", 256, pre=True))
    out.append(make("wrong_shuffle", "wrong", "block", 256, shuffle=8))
    out.append(make("wrong_nosync", "wrong", "block", 256, sync=False))
    out.append(make("wrong_bound", "wrong", "online", 256, bound="cols - 1"))
    if slip_shows(spec, large=True):
        out.append(make("wrong_slip", "wrong", "online", 256, fn=elementwise_fn(spec, True, slip=True)))
    return out
