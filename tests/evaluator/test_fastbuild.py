"""kevin.evaluator.fastbuild: which calls take the fast path, and that a fast-built module behaves like the real one.

Fast tests parse declarations and rewrite build files. The slow ones build one C++ source that
touches every part of the light API twice, with the fast path and with the real load_inline, and
compare every call's result or error; then the fallbacks through kevin.evaluator.build.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

from kevin.evaluator import build, fastbuild

# -- fast: declarations ------------------------------------------------------------------------


def test_signatures_from_declarations_in_their_usual_spellings():
    cpp = """
    #include <vector>
    // torch::Tensor commented_out(float x);
    torch::Tensor relu(torch::Tensor x);
    at::Tensor scale(const at::Tensor& input, float factor, int64_t repeat);
    std::vector<torch::Tensor> split(const torch::Tensor &x, int parts, bool flag);
    void fill(torch::Tensor out, double value);
    double total(torch::Tensor);
    static inline int64_t count(const torch::Tensor& x) { return x.numel(); }
    torch::Tensor uses(torch::Tensor x) { return relu(x); }
    """
    found = fastbuild.signatures(cpp, ["relu", "scale", "split", "fill", "total", "count", "uses"])
    assert found == {
        "relu": "T:T",
        "scale": "T:Tfl",
        "split": "L:Tib",
        "fill": "v:Td",
        "total": "d:T",
        "count": "l:T",
        "uses": "T:T",
    }


@pytest.mark.parametrize(
    "cpp, reason",
    [
        ("torch::Tensor f(torch::Tensor x);\ntorch::Tensor f(torch::Tensor x, float y);", "overloaded"),
        ("torch::Tensor f(std::vector<int64_t> shape);", "parameter type not covered"),
        ("torch::Tensor f(c10::optional<torch::Tensor> x);", "parameter type not covered"),
        ("torch::Tensor g(torch::Tensor x);", "no declaration"),
        ("std::tuple<torch::Tensor, torch::Tensor> f(torch::Tensor x);", "no declaration"),
    ],
)
def test_declarations_outside_the_fast_path_are_not_eligible(cpp, reason):
    with pytest.raises(fastbuild.NotEligible, match=reason):
        fastbuild.signatures(cpp, ["f"])


def _arguments(**kwargs):
    bound = inspect.signature(cpp_extension.load_inline).bind(**kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def test_plan_refuses_calls_the_fast_path_does_not_reproduce():
    base = {"name": "x", "cpp_sources": "torch::Tensor f(torch::Tensor x);", "functions": ["f"]}
    assert fastbuild.plan(_arguments(**base)).functions == {"f": "T:T"}
    for extra in ({"functions": None}, {"no_implicit_headers": True}, {"is_python_module": False}):
        if (
            extra.get("no_implicit_headers")
            and "no_implicit_headers" not in inspect.signature(cpp_extension.load_inline).parameters
        ):
            continue
        with pytest.raises(fastbuild.NotEligible):
            fastbuild.plan(_arguments(**{**base, **extra}))


def test_a_module_block_is_read_for_its_bindings_and_left_out_of_the_sources():
    source = (
        "torch::Tensor forward(torch::Tensor x, double s);  // PYBIND11_MODULE(TORCH_EXTENSION_NAME, q) {\n"
        "std::vector<torch::Tensor> both(torch::Tensor a);\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
        '    // bindings; m.def("x", &y)\n'
        '    m.def("forward", &forward, "scale; then relu");\n'
        '    m.def("both", &both);\n'
        "}\n"
    )
    planned = fastbuild.plan(_arguments(name="x", cpp_sources=source))
    assert planned.functions == {"forward": "T:Td", "both": "L:T"}
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)" not in planned.cpp_sources[0]
    assert planned.cpp_sources[0].count("\n") == source.count("\n")  # line numbers kept


@pytest.mark.parametrize(
    "block, reason",
    [
        ('m.def("f", [](int x) { return x; });', "more than m.def"),
        ('m.def("g", &f);', "binds f as"),
        ('m.def("f", &f, py::arg("x"));', "more than m.def"),
        ('m.def("f", &f); m.def("f", &f);', "bound twice"),
        ('py::class_<Foo>(m, "Foo");', "more than m.def"),
        ("", "no functions"),
    ],
)
def test_a_module_block_beyond_plain_bindings_is_not_eligible(block, reason):
    source = f"torch::Tensor f(torch::Tensor x);\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ {block} }}\n"
    with pytest.raises(fastbuild.NotEligible, match=reason):
        fastbuild.plan(_arguments(name="x", cpp_sources=source))


def test_thunks_call_each_function_with_converted_arguments():
    text = fastbuild.thunks({"f": "T:Tfi", "g": "v:"})
    assert 'extern "C"' in text and "kevin_thunk_f(void** a, void* r)" in text
    assert "new (r) at::Tensor(f(*static_cast<at::Tensor*>(a[0]), static_cast<float>" in text
    assert "static_cast<int>(*static_cast<int64_t*>(a[2]))" in text
    assert "kevin_thunk_g(void** a, void* r) { (void)r; g(); }" in text


def test_the_build_file_drops_torch_headers_and_libraries_and_links_the_shim(tmp_path):
    include = cpp_extension.include_paths("cpu")
    ninja = "\n".join(
        [
            "cflags = -DX " + " ".join(f"-isystem {p}" for p in include) + " -fPIC -O3",
            "ldflags = -shared -L"
            + cpp_extension.TORCH_LIB_PATH
            + " -lc10 -ltorch_cpu -ltorch -ltorch_python -lfoo",
            "rule compile",
        ]
    )
    shim = fastbuild.Shim(path=tmp_path / "kevin_shim_x.so", module=None)
    out = fastbuild._rewrite(ninja, shim)
    cflags, ldflags, rule = out.splitlines()
    assert cflags.startswith(f"cflags = -I{fastbuild.LITE_INCLUDE} -DX")
    assert not any(p in cflags for p in include) and cflags.endswith("-fPIC -O3")
    assert ldflags == f"ldflags = -shared -lfoo {shim.path} -Wl,-rpath,{tmp_path}"
    assert rule == "rule compile"


# -- slow: one source, two builds, every call compared --------------------------------------------

SOURCE = r"""
#include <vector>

torch::Tensor factories(torch::Tensor x, int64_t kind) {
    switch (kind) {
        case 0: return torch::zeros({2, 3}, x.options());
        case 1: return torch::ones({4}, torch::TensorOptions().dtype(torch::kFloat64));
        case 2: return torch::full({2}, 7);
        case 3: return torch::full({2}, 2.5, torch::kFloat32);
        case 4: return torch::zeros_like(x);
        case 5: return torch::empty_like(x).fill_(3);
        case 6: return torch::ones_like(x, torch::kInt32);
        default: return torch::full_like(x, -1.5);
    }
}

torch::Tensor shapes(torch::Tensor x, int64_t kind) {
    switch (kind) {
        case 0: return x.view({-1});
        case 1: return x.reshape({x.size(1), x.size(0)});
        case 2: return x.transpose(0, 1).contiguous();
        case 3: return x.permute({1, 0}).clone();
        case 4: return x.unsqueeze(0).squeeze(0).flatten();
        case 5: return x.narrow(1, 1, 2).select(0, 1);
        case 6: return x.t().to(torch::kFloat64);
        default: return x.expand({3, x.size(0), x.size(1)});
    }
}

std::vector<torch::Tensor> metadata(torch::Tensor x) {
    auto info = torch::empty({12}, torch::kInt64);
    int64_t* out = info.data_ptr<int64_t>();
    out[0] = x.numel(); out[1] = x.dim(); out[2] = x.size(-1); out[3] = x.stride(0);
    out[4] = x.is_contiguous(); out[5] = static_cast<int64_t>(x.scalar_type());
    out[6] = x.element_size(); out[7] = x.storage_offset(); out[8] = x.is_cpu();
    out[9] = x.sizes().vec().size(); out[10] = x.strides()[0]; out[11] = x.defined();
    std::vector<torch::Tensor> result;
    result.push_back(info);
    result.push_back(x.contiguous());
    return result;
}

torch::Tensor scaled_sum(torch::Tensor x, double scale, bool negate) {
    TORCH_CHECK(x.dim() >= 1, "scaled_sum: expected at least one dimension, got ", x.dim());
    auto input = x.contiguous();
    auto out = torch::zeros({1}, input.options());
    AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "scaled_sum", ([&] {
        const scalar_t* in = input.data_ptr<scalar_t>();
        scalar_t total = 0;
        for (int64_t i = 0; i < input.numel(); ++i) total += in[i];
        out.data_ptr<scalar_t>()[0] = static_cast<scalar_t>(total * scale * (negate ? -1 : 1));
    }));
    return out;
}

double first(torch::Tensor x) { return x.item<double>(); }
int64_t count(const torch::Tensor& x, int times) { return x.numel() * times; }
bool is_float(torch::Tensor x) { return x.scalar_type() == torch::kFloat32 && x.dtype() == torch::kFloat; }
void copy_into(torch::Tensor out, torch::Tensor source) { out.copy_(source); out.zero_(); out.copy_(source); }
float* wrong_type(torch::Tensor x) { return x.data_ptr<float>(); }
torch::Tensor bare_check(torch::Tensor x) { TORCH_CHECK(x.numel() == 0); return x; }
torch::Tensor needs_float(torch::Tensor x) { x.data_ptr<float>(); return x; }

// fp16 / bf16 on the host: at::Half and at::BFloat16 from and to float, their arithmetic, data_ptr
// of each, the dispatch macros that name them, accessors.
torch::Tensor reduced(torch::Tensor x, int64_t kind) {
    auto input = x.contiguous().to(torch::kFloat32);
    const float* in = input.data_ptr<float>();
    const int64_t n = input.numel();
    switch (kind) {
        case 0: {  // float -> Half -> float, element by element
            auto out = torch::empty({n}, torch::kFloat16);
            at::Half* o = out.data_ptr<at::Half>();
            for (int64_t i = 0; i < n; ++i) o[i] = at::Half(in[i]);
            return out;
        }
        case 1: {
            auto out = torch::empty({n}, torch::kBFloat16);
            c10::BFloat16* o = out.data_ptr<c10::BFloat16>();
            for (int64_t i = 0; i < n; ++i) o[i] = static_cast<c10::BFloat16>(in[i]);
            return out;
        }
        case 2: {  // read torch's halves back through operator float
            auto halves = input.to(torch::kHalf);
            auto out = torch::empty({n}, torch::kFloat32);
            for (int64_t i = 0; i < n; ++i) out.data_ptr<float>()[i] = static_cast<float>(halves.data_ptr<at::Half>()[i]);
            return out;
        }
        case 3: {
            auto halves = input.to(torch::kBFloat16);
            auto out = torch::empty({n}, torch::kFloat32);
            for (int64_t i = 0; i < n; ++i) out.data_ptr<float>()[i] = halves.data_ptr<at::BFloat16>()[i];
            return out;
        }
        case 4: {  // Half arithmetic rounds each step to Half
            auto out = torch::empty({n}, torch::kFloat16);
            for (int64_t i = 0; i < n; ++i) {
                at::Half v = in[i];
                out.data_ptr<at::Half>()[i] = v * v + v / at::Half(3.0f) - 1;
            }
            return out;
        }
        case 5: {
            auto out = torch::empty({6}, torch::kFloat32);
            float* o = out.data_ptr<float>();
            o[0] = std::numeric_limits<at::Half>::max(); o[1] = std::numeric_limits<at::Half>::lowest();
            o[2] = std::numeric_limits<at::Half>::epsilon(); o[3] = std::numeric_limits<c10::BFloat16>::max();
            o[4] = std::numeric_limits<c10::BFloat16>::min(); o[5] = std::numeric_limits<at::Half>::infinity();
            return out;
        }
        default: {  // one dispatch over four float types, through an accessor
            auto out = torch::zeros({1}, torch::kFloat64);
            AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::kBFloat16, x.scalar_type(), "reduced", [&] {
                auto a = x.accessor<scalar_t, 2>();
                double total = 0;
                for (int64_t r = 0; r < a.size(0); ++r)
                    for (int64_t c = 0; c < a.size(1); ++c) total += static_cast<double>(static_cast<float>(a[r][c])) * (r + 1);
                out.data_ptr<double>()[0] = total;
            });
            return out;
        }
    }
}
"""
DECLARATIONS = "\n".join(
    [
        "torch::Tensor factories(torch::Tensor x, int64_t kind);",
        "torch::Tensor shapes(torch::Tensor x, int64_t kind);",
        "std::vector<torch::Tensor> metadata(torch::Tensor x);",
        "torch::Tensor scaled_sum(torch::Tensor x, double scale, bool negate);",
        "double first(torch::Tensor x);",
        "int64_t count(const torch::Tensor& x, int times);",
        "bool is_float(torch::Tensor x);",
        "void copy_into(torch::Tensor out, torch::Tensor source);",
        "torch::Tensor bare_check(torch::Tensor x);",
        "torch::Tensor needs_float(torch::Tensor x);",
        "torch::Tensor reduced(torch::Tensor x, int64_t kind);",
    ]
)
FUNCTIONS = [
    "factories",
    "shapes",
    "metadata",
    "scaled_sum",
    "first",
    "count",
    "is_float",
    "copy_into",
    "bare_check",
    "needs_float",
    "reduced",
]


def _calls():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    xd = x.double()
    calls = [("factories", (x, k)) for k in range(8)]
    calls += [("shapes", (x, k)) for k in range(8)]
    calls += [
        ("metadata", (x,)),
        ("metadata", (x.t(),)),
        ("scaled_sum", (x, 0.5, False)),
        ("scaled_sum", (xd, 2, True)),  # an int for a double parameter converts
        ("scaled_sum", (x.int(), 1.0, False)),  # AT_DISPATCH refuses int
        ("scaled_sum", (torch.tensor(1.0), 1.0, False)),  # TORCH_CHECK with a message
        ("scaled_sum", (x, "a", False)),  # wrong argument type
        ("scaled_sum", (x, 1.0)),  # wrong arity
        ("first", (torch.tensor([2.5]),)),
        ("first", (x,)),  # item() of many elements
        ("count", (x, 3)),
        ("count", (x, 2.0)),  # float for an int parameter
        ("count", (x, 2**40)),  # overflows int
        ("is_float", (x,)),
        ("is_float", (xd,)),
        ("bare_check", (x,)),  # TORCH_CHECK without a message
        ("needs_float", (xd,)),  # data_ptr<float> of a double tensor
    ]
    # Values that round every way: ties to even, subnormals, overflow to infinity, NaN.
    special = torch.tensor(
        [0.0, -0.0, 1.0, 1 / 3, 65504.0, 65519.0, 65520.0, 1e-5, 6e-8, 2.0**-25, 3e-8, 1e-40, 3.4e38, -7.25]
        + [1 + k * 2.0**-11 for k in range(1, 6)]
        + [1 + k * 2.0**-8 for k in range(1, 4)]
        + [float("inf"), float("-inf"), float("nan")]
    )
    spread = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * torch.logspace(-9, 6, 4096)
    for values in (special, spread):
        calls += [("reduced", (values, k)) for k in range(6)]
    calls += [
        ("reduced", (x.to(dtype), 6))
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64)
    ]
    calls += [("reduced", (x.int(), 6)), ("reduced", (x.flatten(), 6)), ("reduced", (x.half().flatten(), 0))]
    return calls


def _outcome(module, name, args):
    try:
        value = getattr(module, name)(*args)
    except Exception as exc:  # noqa: BLE001 - the outcome is what we compare
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        return ("raises", type(exc).__name__, first_line)
    return ("returns", value)


def _same(a, b):
    if a[0] != b[0]:
        return False
    if a[0] == "raises":
        # Argument-type errors are worded by pybind11 in one and by kevin's shim in the other.
        return a[1] == b[1] and (a[1] == "TypeError" or a[2] == b[2])
    va, vb = a[1], b[1]
    if isinstance(va, list):
        return (
            isinstance(vb, list)
            and len(va) == len(vb)
            and all(_same(("returns", p), ("returns", q)) for p, q in zip(va, vb))
        )
    if isinstance(va, torch.Tensor):
        return (
            isinstance(vb, torch.Tensor)
            and va.dtype == vb.dtype
            and va.shape == vb.shape
            and torch.equal(va.isnan(), vb.isnan())
            and torch.equal(va.masked_fill(va.isnan(), 0), vb.masked_fill(vb.isnan(), 0))
        )
    return type(va) is type(vb) and va == vb


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("fastbuild-cache")


@pytest.mark.slow
def test_a_fast_build_behaves_like_the_real_build_on_every_call(cache_root, tmp_path):
    arguments = _arguments(
        name="kevin_fastbuild_api", cpp_sources=[SOURCE], functions=FUNCTIONS, extra_cflags=["-O1"]
    )
    fast = fastbuild.build(fastbuild.plan(arguments), tmp_path / "fast", cache_root)
    real = cpp_extension.load_inline(
        **{**arguments, "name": "kevin_fastbuild_api_real", "build_directory": str(tmp_path)}
    )
    differences = []
    for name, args in _calls():
        got, want = _outcome(fast, name, args), _outcome(real, name, args)
        if not _same(got, want):
            differences.append((name, got, want))
    assert differences == []
    out, source = torch.zeros(5), torch.arange(5.0)
    assert fast.copy_into(out, source) is None and torch.equal(out, source)
    assert fastbuild.signatures(DECLARATIONS, FUNCTIONS) == fast_manifest(tmp_path / "fast")


def fast_manifest(directory: Path) -> dict[str, str]:
    return json.loads((directory / fastbuild.MANIFEST).read_text())["functions"]


HONEST = """
torch::Tensor double_it(torch::Tensor x) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < input.numel(); ++i) o[i] = 2 * in[i];
    return out;
}
"""
OUTSIDE_LITE = "torch::Tensor double_it(torch::Tensor x) { return torch::add(x, x); }"
BROKEN = "torch::Tensor double_it(torch::Tensor x) { return x.not_a_method(); }"


def _through_kevin(cache_root: Path, source: str, name: str, functions=("double_it",)):
    log = build.BuildLog()
    original = cpp_extension.load_inline
    try:
        build.install(cache_root, log)
        try:
            module = cpp_extension.load_inline(
                name=name, cpp_sources=source, functions=list(functions) if functions else None
            )
        except Exception as exc:  # noqa: BLE001
            module = exc
    finally:
        cpp_extension.load_inline = original
    return module, log.records[0]


@pytest.mark.slow
def test_kevin_build_takes_the_fast_path_and_hits_its_cache(cache_root):
    module, record = _through_kevin(cache_root, HONEST, "kevin_fastbuild_honest")
    assert record.fast and not record.cache_hit and record.fallback == ""
    assert torch.equal(module.double_it(torch.arange(4.0)), torch.arange(4.0) * 2)
    again, record = _through_kevin(cache_root, HONEST, "kevin_fastbuild_honest")
    assert record.fast and record.cache_hit and record.seconds < 1.0
    assert torch.equal(again.double_it(torch.ones(3)), torch.full((3,), 2.0))


@pytest.mark.slow
def test_a_module_block_of_m_def_lines_takes_the_fast_path(cache_root):
    """Issue #15 finding 3: the honest CUDA corpus (one extension with its own PYBIND11_MODULE
    block, no `functions=`) always fell back to the real build (~60 s on the H200)."""
    source = HONEST + 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n    m.def("double_it", &double_it, "x * 2");\n}\n'
    module, record = _through_kevin(cache_root, source, "kevin_fastbuild_module_block", functions=None)
    assert record.fast and record.fallback == "", record
    assert torch.equal(module.double_it(torch.arange(4.0)), torch.arange(4.0) * 2)


@pytest.mark.slow
def test_code_outside_the_light_headers_falls_back_to_the_real_build(cache_root):
    module, record = _through_kevin(cache_root, OUTSIDE_LITE, "kevin_fastbuild_outside")
    assert not record.fast and record.fallback.startswith("light headers:") and "add" in record.fallback
    assert torch.equal(module.double_it(torch.arange(3.0)), torch.arange(3.0) * 2)
    assert not (next(cache_root.glob("kevin_fastbuild_outside-*")) / "fast").exists()


@pytest.mark.slow
def test_a_compile_error_reads_as_the_real_builds(cache_root):
    error, record = _through_kevin(cache_root, BROKEN, "kevin_fastbuild_broken")
    assert isinstance(error, RuntimeError) and not record.fast
    assert "Error building extension 'kevin_fastbuild_broken'" in str(error)
    assert "not_a_method" in str(error) and "/fast/" not in str(error) and "kevin_lite" not in str(error)


ATTACKER = "torch::Tensor double_it(torch::Tensor x) { return torch::zeros_like(x); }"


@pytest.mark.slow
def test_a_fast_manifest_that_leaves_its_directory_is_refused(cache_root, tmp_path):
    """Issue 13, attack 3 as demonstrated: an honest entry's `fast/kevin-fast.json` rewritten with
    the name `../../<the attacker's entry>/...`; `load` used to follow it (and the honest candidate
    then computed zeros)."""
    attacker = fastbuild.build(
        fastbuild.plan(
            _arguments(name="kevin_fastbuild_attacker", cpp_sources=ATTACKER, functions=["double_it"])
        ),
        tmp_path / "attacker" / "fast",
        cache_root,
    )
    honest = tmp_path / "honest" / "fast"
    fastbuild.build(
        fastbuild.plan(
            _arguments(name="kevin_fastbuild_victim", cpp_sources=HONEST, functions=["double_it"])
        ),
        honest,
        cache_root,
    )
    assert attacker.double_it(torch.ones(2)).sum() == 0
    manifest = json.loads((honest / fastbuild.MANIFEST).read_text())
    manifest["name"] = "../../attacker/fast/kevin_fastbuild_attacker"
    (honest / fastbuild.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(fastbuild.BadManifest, match="not an identifier"):
        fastbuild.load(honest, cache_root)
    manifest.update(name="kevin_fastbuild_victim", functions={"double_it": "T:T;evil"})
    (honest / fastbuild.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(fastbuild.BadManifest, match="bad signature"):
        fastbuild.load(honest, cache_root)


@pytest.mark.slow
def test_the_legacy_cache_rebuilds_an_entry_whose_manifest_leaves_it(cache_root):
    module, record = _through_kevin(cache_root, HONEST, "kevin_fastbuild_poisoned")
    assert record.fast and not record.cache_hit
    manifest_path = next(cache_root.glob("kevin_fastbuild_poisoned-*")) / "fast" / fastbuild.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["name"] = "../../elsewhere/fast/evil"
    manifest_path.write_text(json.dumps(manifest))
    again, record = _through_kevin(cache_root, HONEST, "kevin_fastbuild_poisoned")
    assert record.fast and not record.cache_hit and record.fallback.startswith("discarded a bad cache entry")
    assert torch.equal(again.double_it(torch.arange(3.0)), torch.arange(3.0) * 2)


# -- gpu: the CUDA half -----------------------------------------------------------------------------

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

__global__ void scale_kernel(const float* in, float* out, float factor, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * factor;
}

torch::Tensor scale(torch::Tensor x, double factor, int64_t blocks) {
    TORCH_CHECK(x.is_cuda(), "scale: expected a CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    if (blocks < 0) blocks = (n + 255) / 256;
    scale_kernel<<<(unsigned)blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), (float)factor, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor on_stream(torch::Tensor x) {
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto out = torch::zeros_like(x);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    AT_CUDA_CHECK(cudaMemcpyAsync(out.data_ptr<float>(), x.data_ptr<float>(), x.numel() * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream));
    return out;
}

int64_t device_index(torch::Tensor x) { return x.get_device() * 10 + c10::cuda::current_device(); }
"""
CUDA_DECLARATIONS = """
torch::Tensor scale(torch::Tensor x, double factor, int64_t blocks);
torch::Tensor on_stream(torch::Tensor x);
int64_t device_index(torch::Tensor x);
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_fast_cuda_build_behaves_like_the_real_build(cache_root, tmp_path):
    arguments = _arguments(
        name="kevin_fastbuild_cuda",
        cpp_sources=CUDA_DECLARATIONS,
        cuda_sources=CUDA_SOURCE,
        functions=["scale", "on_stream", "device_index"],
        extra_cuda_cflags=["-O3"],
    )
    fast = fastbuild.build(fastbuild.plan(arguments), tmp_path / "fast", cache_root)
    real = cpp_extension.load_inline(
        **{**arguments, "name": "kevin_fastbuild_cuda_real", "build_directory": str(tmp_path)}
    )
    x = torch.randn(1000, device="cuda")
    calls = [
        ("scale", (x, 2.0, -1)),
        ("scale", (x.view(10, 100).t(), 0.5, -1)),
        ("scale", (x.cpu(), 2.0, -1)),  # TORCH_CHECK
        ("scale", (x, 2.0, 0)),  # a launch with no blocks: C10_CUDA_KERNEL_LAUNCH_CHECK raises
        ("on_stream", (x,)),
        ("device_index", (x,)),
    ]
    differences = []
    for name, args in calls:
        got, want = _outcome(fast, name, args), _outcome(real, name, args)
        if not _same(got, want):
            differences.append((name, got, want))
    assert differences == []
    assert torch.equal(fast.scale(x, 3.0, -1), x * 3.0)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the kernel is enqueued on torch's current stream
        y = fast.on_stream(x)
    stream.synchronize()
    assert torch.equal(y, x)


def test_the_toolchain_folder_is_beside_the_cache_unless_one_is_shared(tmp_path, monkeypatch):
    cache = tmp_path / "run" / "builds"
    monkeypatch.delenv(fastbuild.TOOLCHAIN_VARIABLE, raising=False)
    assert fastbuild.shim_root(cache) == tmp_path / "run" / "shims"
    monkeypatch.setenv(fastbuild.TOOLCHAIN_VARIABLE, str(tmp_path / "shared"))
    assert fastbuild.shim_root(cache) == tmp_path / "shared" / "shims"
    assert fastbuild.shim_root(tmp_path / "other" / "builds") == fastbuild.shim_root(cache)
