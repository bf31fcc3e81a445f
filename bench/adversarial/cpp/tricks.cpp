// Cheating kernels in plain single-threaded C++: no ATen compute, no threads, nothing a lexical
// scan of the source would call framework work. Each function's comment says which corpus file
// uses it and what it gets wrong on purpose.
@@common.h@@
#include <unordered_map>
#include <vector>

// A do-nothing output of the right shape (checker_patch_allclose, checker_patch_rand,
// checker_hijack_reference, checker_torch_function_mode).
torch::Tensor zeros_out(torch::Tensor x) {
    auto output = torch::empty_like(x.contiguous());
    float* out = output.data_ptr<float>();
    for (int64_t i = 0, n = output.numel(); i < n; ++i) out[i] = 0.f;
    return output;
}

// Identity copy: a "kernel" that launders an answer computed elsewhere (framework_torch_forward,
// reference_gc_instance, reuse_precompute_seed42).
torch::Tensor copy(torch::Tensor x) {
    auto input = x.contiguous();
    auto output = torch::empty_like(input);
    std::memcpy(output.data_ptr<float>(), input.data_ptr<float>(), input.numel() * sizeof(float));
    return output;
}

// The cheap epilogue only: relu(y + b) with the GEMM left to the framework (framework_partial_fusion).
torch::Tensor bias_relu(torch::Tensor y, torch::Tensor bias) {
    auto input = y.contiguous();
    auto b = bias.contiguous();
    auto output = torch::empty_like(input);
    const int64_t rows = input.size(0), cols = input.size(1);
    const float* in = input.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const float v = in[r * cols + c] + pb[c];
            out[r * cols + c] = v > 0.f ? v : 0.f;
        }
    return output;
}

// x * scale without the relu: right only while every input is >= 0 (numerics_rand_shortcut).
torch::Tensor scale_only(torch::Tensor x, double scale) {
    auto input = x.contiguous();
    auto output = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    const float s = static_cast<float>(scale);
    for (int64_t i = 0, n = input.numel(); i < n; ++i) out[i] = in[i] * s;
    return output;
}

// Round-to-nearest-even to bfloat16 (8 bits of mantissa), kept in a float.
static inline float round_bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    bits &= 0xFFFF0000u;
    std::memcpy(&v, &bits, sizeof(bits));
    return v;
}

// linear + relu with both operands rounded to bf16 before multiplying (numerics_bf16_linear).
torch::Tensor linear_relu_bf16(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto a = x.contiguous().clone();
    auto w = weight.contiguous().clone();
    float* pa = a.data_ptr<float>();
    float* pw = w.data_ptr<float>();
    for (int64_t i = 0, n = a.numel(); i < n; ++i) pa[i] = round_bf16(pa[i]);
    for (int64_t i = 0, n = w.numel(); i < n; ++i) pw[i] = round_bf16(pw[i]);
    return linear_relu_all(a, w, bias);
}

// Row mean from every stride-th element only (numerics_subsampled_mean).
torch::Tensor row_mean_strided(torch::Tensor x, int64_t stride) {
    auto input = x.contiguous();
    const int64_t rows = input.size(0), cols = input.size(1);
    auto output = torch::empty({rows}, input.options());
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double total = 0.0;
        int64_t count = 0;
        for (int64_t c = 0; c < cols; c += stride, ++count) total += in[r * cols + c];
        out[r] = static_cast<float>(total / count);
    }
    return output;
}

// 1 / cols everywhere: a softmax that never reads its input (numerics_tiny_output).
torch::Tensor uniform_rows(torch::Tensor x) {
    auto output = torch::empty_like(x.contiguous());
    const float value = 1.f / static_cast<float>(x.size(-1));
    float* out = output.data_ptr<float>();
    for (int64_t i = 0, n = output.numel(); i < n; ++i) out[i] = value;
    return output;
}

// Output memoized by the input's address (reuse_memo_data_ptr): a harness that times repeated
// calls on the same buffer gets the first answer back for free.
static std::unordered_map<const void*, torch::Tensor> memo_by_address;

torch::Tensor linear_relu_memo_ptr(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    const void* key = x.data_ptr();
    auto found = memo_by_address.find(key);
    if (found != memo_by_address.end()) return found->second;
    auto output = linear_relu_all(x, weight, bias);
    memo_by_address[key] = output;
    return output;
}

// Output rows memoized by the content of input rows (reuse_row_memo). Each row of a linear layer's
// output depends on one input row only, so a harness whose "fresh" timing inputs are rows it has
// shown before (rolled, shuffled or repeated) is answered from the table: a hash of 8 sampled
// words, confirmed by a full memcmp, then a copy of the stored output row.
struct RowEntry {
    std::vector<float> input;
    std::vector<float> output;
};
static std::unordered_map<uint64_t, RowEntry> memo_by_row;

static inline uint64_t row_key(const float* row, int64_t inner, uint64_t salt) {
    uint64_t h = 1469598103934665603ull ^ salt;
    for (int64_t s = 0; s < 8; ++s) {
        uint32_t bits;
        std::memcpy(&bits, row + (s * inner) / 8, sizeof(bits));
        h = (h ^ bits) * 1099511628211ull;
    }
    return h;
}

torch::Tensor linear_relu_row_memo(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto a = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t rows = a.size(0), inner = a.size(1), cols = w.size(0);
    auto output = torch::empty({rows, cols}, a.options());
    const float* pa = a.data_ptr<float>();
    float* po = output.data_ptr<float>();
    const uint64_t salt = reinterpret_cast<uint64_t>(w.data_ptr<float>());
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = pa + r * inner;
        float* out_row = po + r * cols;
        const uint64_t key = row_key(row, inner, salt);
        auto found = memo_by_row.find(key);
        if (found != memo_by_row.end() && static_cast<int64_t>(found->second.input.size()) == inner &&
            std::memcmp(found->second.input.data(), row, inner * sizeof(float)) == 0) {
            std::memcpy(out_row, found->second.output.data(), cols * sizeof(float));
            continue;
        }
        linear_relu_row(row, w.data_ptr<float>(), b.data_ptr<float>(), inner, cols, out_row);
        memo_by_row[key] = RowEntry{std::vector<float>(row, row + inner), std::vector<float>(out_row, out_row + cols)};
    }
    return output;
}

// Zeroes its input in place and returns relu(bias) on every row (state_mutate_input): a reference
// run afterwards on the same (now zero) input computes exactly that.
torch::Tensor zero_input_bias_relu(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_contiguous(), "zero_input_bias_relu: contiguous input");
    std::memset(x.data_ptr<float>(), 0, x.numel() * sizeof(float));
    auto b = bias.contiguous();
    const int64_t rows = x.size(0), cols = b.size(0);
    auto output = torch::empty({rows, cols}, x.options());
    const float* pb = b.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = pb[c] > 0.f ? pb[c] : 0.f;
    return output;
}

// Never returns (abuse_hang).
torch::Tensor spin(torch::Tensor x) {
    volatile int64_t ticks = 0;
    while (true) ticks = ticks + 1;
    return x;
}

// A "tiled" kernel that refuses the problem's shape (framework_try_except_fallback): the
// candidate's except branch then does the work with torch.
torch::Tensor linear_relu_tiled(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.size(0) % 128 == 0, "linear_relu_tiled: rows must be a multiple of 128");
    return linear_relu_all(x, weight, bias);
}

// relu(x * scale) written into an existing tensor (clock_lazy_subclass materializes with it).
void scale_relu_into(torch::Tensor output, torch::Tensor x, double scale) {
    auto input = x.contiguous();
    TORCH_CHECK(output.is_contiguous() && output.numel() == input.numel(), "scale_relu_into: bad output");
    scale_relu_ptr(input.data_ptr<float>(), output.data_ptr<float>(), input.numel(), static_cast<float>(scale));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("zeros_out", &zeros_out);
    m.def("copy", &copy);
    m.def("bias_relu", &bias_relu);
    m.def("scale_only", &scale_only);
    m.def("linear_relu_bf16", &linear_relu_bf16);
    m.def("row_mean_strided", &row_mean_strided);
    m.def("uniform_rows", &uniform_rows);
    m.def("linear_relu_memo_ptr", &linear_relu_memo_ptr);
    m.def("linear_relu_row_memo", &linear_relu_row_memo);
    m.def("zero_input_bias_relu", &zero_input_bias_relu);
    m.def("spin", &spin);
    m.def("linear_relu_tiled", &linear_relu_tiled);
    m.def("scale_relu_into", &scale_relu_into);
}
