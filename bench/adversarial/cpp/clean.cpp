// Honest kernels for the corpus's own problems (bench/adversarial/problems/): each computes the
// whole task in plain C++ loops, at full fp32 precision, on whatever input it is given.
@@common.h@@
#include <cmath>

torch::Tensor scale_relu(torch::Tensor x, double scale) { return scale_relu_all(x, scale); }

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    return linear_relu_all(x, weight, bias);
}

// Softmax over the last dimension of a 2-D tensor, max-subtracted, sums in double.
torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "softmax_rows: 2-D float32");
    auto input = x.contiguous();
    auto output = torch::empty_like(input);
    const int64_t rows = input.size(0), cols = input.size(1);
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float* dst = out + r * cols;
        float peak = row[0];
        for (int64_t c = 1; c < cols; ++c) peak = row[c] > peak ? row[c] : peak;
        double total = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            dst[c] = std::exp(row[c] - peak);
            total += dst[c];
        }
        const float inverse = static_cast<float>(1.0 / total);
        for (int64_t c = 0; c < cols; ++c) dst[c] *= inverse;
    }
    return output;
}

// Mean of each row of a 2-D tensor, summed in double.
torch::Tensor row_mean(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "row_mean: 2-D float32");
    auto input = x.contiguous();
    const int64_t rows = input.size(0), cols = input.size(1);
    auto output = torch::empty({rows}, input.options());
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double total = 0.0;
        for (int64_t c = 0; c < cols; ++c) total += in[r * cols + c];
        out[r] = static_cast<float>(total / cols);
    }
    return output;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("scale_relu", &scale_relu);
    m.def("linear_relu", &linear_relu);
    m.def("softmax_rows", &softmax_rows);
    m.def("row_mean", &row_mean);
}
