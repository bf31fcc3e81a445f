// The Python face of kernels.cu (kevin_adv_cuda_kernels): declarations and bindings only.
torch::Tensor tril_matmul(torch::Tensor a, torch::Tensor b);
torch::Tensor gram(torch::Tensor x);
torch::Tensor linear_act(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t act);
torch::Tensor diag_matmul(torch::Tensor d, torch::Tensor b);
torch::Tensor softmax_rows(torch::Tensor x);
torch::Tensor softmax_entropy(torch::Tensor x);
torch::Tensor row_mean(torch::Tensor x);
torch::Tensor scale_relu(torch::Tensor x, double scale);
torch::Tensor gate_relu(torch::Tensor x, torch::Tensor y);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("tril_matmul", &tril_matmul);
    m.def("gram", &gram);
    m.def("linear_act", &linear_act);
    m.def("diag_matmul", &diag_matmul);
    m.def("softmax_rows", &softmax_rows);
    m.def("softmax_entropy", &softmax_entropy);
    m.def("row_mean", &row_mean);
    m.def("scale_relu", &scale_relu);
    m.def("gate_relu", &gate_relu);
}
