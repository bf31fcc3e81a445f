// Dispatcher registrations made at run time (checker_dispatch_zero_reference,
// state_dispatch_slow_reference): a torch::Library created on a call replaces aten::relu's CPU
// kernel for the rest of the process, so every later torch.relu on the CPU, the reference's
// included, runs the kernel below. No ATen compute, no threads.
@@common.h@@
#include <memory>

// relu(x * scale), honestly (the kernel state_dispatch_slow_reference returns).
torch::Tensor scale_relu(torch::Tensor x, double scale) {
    auto input = x.contiguous();
    auto output = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    const float s = static_cast<float>(scale);
    for (int64_t i = 0, n = input.numel(); i < n; ++i) {
        const float v = in[i] * s;
        out[i] = v > 0.f ? v : 0.f;
    }
    return output;
}

// Zeros of x's shape (checker_dispatch_zero_reference's forward).
torch::Tensor zeros_like_input(torch::Tensor x) {
    auto output = torch::empty_like(x.contiguous());
    float* out = output.data_ptr<float>();
    for (int64_t i = 0, n = output.numel(); i < n; ++i) out[i] = 0.f;
    return output;
}

// Replacement relu kernels: one answers zeros, one is right but does its loop 64 times.
static at::Tensor zero_relu(const at::Tensor& self) {
    return zeros_like_input(self);
}

static at::Tensor slow_relu(const at::Tensor& self) {
    auto input = self.contiguous();
    auto output = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int pass = 0; pass < 64; ++pass) {
        for (int64_t i = 0, n = input.numel(); i < n; ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
        asm volatile("" : : "r"(out) : "memory");  // keep every pass
    }
    return output;
}

static std::unique_ptr<torch::Library> replacement;

// Registers the chosen kernel for aten::relu on the CPU; it stays for the life of the process.
void replace_relu(bool zeros) {
    replacement = std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
    if (zeros)
        replacement->impl("relu", zero_relu);
    else
        replacement->impl("relu", slow_relu);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("scale_relu", &scale_relu);
    m.def("zeros_like_input", &zeros_like_input);
    m.def("replace_relu", &replace_relu);
}
