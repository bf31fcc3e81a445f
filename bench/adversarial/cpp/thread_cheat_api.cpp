// The Python face of thread_cheat.cu (kevin_adv_cuda_thread_cheat).
torch::Tensor scale_relu_later(torch::Tensor x, double scale);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale_relu_later", &scale_relu_later); }
