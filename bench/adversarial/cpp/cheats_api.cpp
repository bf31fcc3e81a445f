// The Python face of cheats.cu (kevin_adv_cuda_cheats): declarations and bindings only.
torch::Tensor touch(torch::Tensor x);
torch::Tensor copy_out(torch::Tensor x);
torch::Tensor bias_gelu_(torch::Tensor y, torch::Tensor bias);
torch::Tensor tril_matmul_small(torch::Tensor a, torch::Tensor b);
torch::Tensor gram_naive(torch::Tensor x);
torch::Tensor gram_memo_by_address(torch::Tensor x);
torch::Tensor softmax_half(torch::Tensor x);
torch::Tensor linear_gelu_bf16(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
torch::Tensor scale_only(torch::Tensor x, double scale);
torch::Tensor gate_relu_into_x(torch::Tensor x, torch::Tensor y);
torch::Tensor spin_forever(torch::Tensor x);
torch::Tensor wild_write(torch::Tensor x);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("touch", &touch);
    m.def("copy_out", &copy_out);
    m.def("bias_gelu_", &bias_gelu_);
    m.def("tril_matmul_small", &tril_matmul_small);
    m.def("gram_naive", &gram_naive);
    m.def("gram_memo_by_address", &gram_memo_by_address);
    m.def("softmax_half", &softmax_half);
    m.def("linear_gelu_bf16", &linear_gelu_bf16);
    m.def("scale_only", &scale_only);
    m.def("gate_relu_into_x", &gate_relu_into_x);
    m.def("spin_forever", &spin_forever);
    m.def("wild_write", &wild_write);
}
