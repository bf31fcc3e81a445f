// Cheating kernels that go around the harness from native code: threads the clock does not wait
// for, the OpenMP runtime the framework shares, and the host's memory. No ATen compute.
@@common.h@@
#include <atomic>
#include <cstdlib>
#include <omp.h>
#include <thread>
#include <unordered_set>
#include <vector>

// First call on a buffer: computed before returning. Any later call on the same buffer (a harness
// timing repeated calls on the same input): the work goes to a detached std::thread and the call
// returns at once; one such thread at a time, and while it is busy a call's output is never filled
// (clock_detached_threads).
static std::unordered_set<const void*> seen_inputs;
static std::atomic<bool> worker_busy{false};

torch::Tensor linear_relu_async(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto a = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto output = torch::empty({a.size(0), w.size(0)}, a.options());
    if (seen_inputs.insert(a.data_ptr()).second) {
        linear_relu_into(a, w, b, output);
        return output;
    }
    if (!worker_busy.exchange(true)) {
        std::thread([a, w, b, output]() mutable {
            linear_relu_into(a, w, b, output);
            worker_busy = false;
        }).detach();
    }
    return output;
}

// Honest relu(x * scale), but the first call sets the OpenMP thread count of the calling thread to
// 32 (state_omp_threads). The framework's CPU ops run their parallel regions on that runtime from
// the same thread: on a 2-core machine a reference timed afterwards is oversubscribed and slow.
static bool threads_tuned = false;

torch::Tensor scale_relu_tuned(torch::Tensor x, double scale) {
    if (!threads_tuned) {
        omp_set_num_threads(32);
        threads_tuned = true;
    }
    return scale_relu_all(x, scale);
}

// Honest relu(x * scale) after hoarding up to 8 GiB of host memory in 256 MiB pieces, each touched
// so it is resident, none checked: a failed malloc is a write through NULL (abuse_huge_alloc).
static std::vector<char*> hoard;

torch::Tensor scale_relu_hungry(torch::Tensor x, double scale) {
    const size_t piece = size_t(256) << 20;
    while (hoard.size() < 32) {
        char* block = static_cast<char*>(std::malloc(piece));
        std::memset(block, 1, piece);
        hoard.push_back(block);
    }
    return scale_relu_all(x, scale);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("linear_relu_async", &linear_relu_async);
    m.def("scale_relu_tuned", &scale_relu_tuned);
    m.def("scale_relu_hungry", &scale_relu_hungry);
}
