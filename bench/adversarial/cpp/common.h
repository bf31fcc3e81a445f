// Loops shared by the corpus's C++ sources; bench/adversarial.py pastes this file wherever a
// source names it between double at-signs (a load_inline source is one string: it cannot #include
// its neighbours).
// Plain loops over raw pointers: no ATen compute.
#include <cstdint>
#include <cstring>

// out[r, :] = relu(x[r, :] @ w^T + b) for one row; w is (cols, inner), row-major.
static inline void linear_relu_row(const float* x_row, const float* w, const float* b,
                                   int64_t inner, int64_t cols, float* out_row) {
    for (int64_t j = 0; j < cols; ++j) {
        const float* w_row = w + j * inner;
        float acc = 0.f;
        for (int64_t k = 0; k < inner; ++k) acc += x_row[k] * w_row[k];
        acc += b[j];
        out_row[j] = acc > 0.f ? acc : 0.f;
    }
}

// Writes relu(x @ w^T + b) into `output` (rows x cols); every tensor contiguous float32.
static inline void linear_relu_into(const torch::Tensor& x, const torch::Tensor& w,
                                    const torch::Tensor& b, torch::Tensor& output) {
    const int64_t rows = x.size(0), inner = x.size(1), cols = w.size(0);
    const float* px = x.data_ptr<float>();
    const float* pw = w.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) linear_relu_row(px + r * inner, pw, pb, inner, cols, po + r * cols);
}

static inline torch::Tensor linear_relu_all(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "linear_relu: bad shapes");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "linear_relu: float32 only");
    auto a = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto output = torch::empty({a.size(0), w.size(0)}, a.options());
    linear_relu_into(a, w, b, output);
    return output;
}

static inline void scale_relu_ptr(const float* in, float* out, int64_t count, float scale) {
    for (int64_t i = 0; i < count; ++i) {
        const float v = in[i] * scale;
        out[i] = v > 0.f ? v : 0.f;
    }
}

static inline torch::Tensor scale_relu_all(torch::Tensor x, double scale) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "scale_relu: float32 only");
    auto input = x.contiguous();
    auto output = torch::empty_like(input);
    scale_relu_ptr(input.data_ptr<float>(), output.data_ptr<float>(), input.numel(), static_cast<float>(scale));
    return output;
}
