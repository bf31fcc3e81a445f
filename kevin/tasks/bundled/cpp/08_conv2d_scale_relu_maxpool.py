"""cpp candidate for tasks/08_conv2d_scale_relu_maxpool.py: each pooled output computes its 2x2 conv outputs directly."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <cmath>

torch::Tensor conv_scale_relu_pool(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor scale) {
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4, "conv_scale_relu_pool: expected NCHW input and OIHW weight");
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto s = scale.contiguous();
    const int64_t batch = input.size(0), in_ch = input.size(1), height = input.size(2), width = input.size(3);
    const int64_t out_ch = w.size(0), kh = w.size(2), kw = w.size(3);
    TORCH_CHECK(w.size(1) == in_ch && s.numel() == out_ch, "conv_scale_relu_pool: channel mismatch");
    const int64_t pad_h = kh / 2, pad_w = kw / 2;
    const int64_t pooled_h = height / 2, pooled_w = width / 2;  // max_pool2d(2) floors odd sizes
    auto output = torch::empty({batch, out_ch, pooled_h, pooled_w}, input.options());
    const float* in = input.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    const float* sp = s.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t n = 0; n < batch; ++n) {
        for (int64_t oc = 0; oc < out_ch; ++oc) {
            const float* filt = wp + oc * in_ch * kh * kw;
            for (int64_t py = 0; py < pooled_h; ++py) {
                for (int64_t px = 0; px < pooled_w; ++px) {
                    float best = -INFINITY;
                    for (int64_t dy = 0; dy < 2; ++dy) {
                        for (int64_t dx = 0; dx < 2; ++dx) {
                            const int64_t oy = 2 * py + dy, ox = 2 * px + dx;
                            double acc = bp[oc];
                            for (int64_t ic = 0; ic < in_ch; ++ic) {
                                const float* plane = in + (n * in_ch + ic) * height * width;
                                const float* f = filt + ic * kh * kw;
                                for (int64_t ky = 0; ky < kh; ++ky) {
                                    const int64_t iy = oy + ky - pad_h;
                                    if (iy < 0 || iy >= height) continue;
                                    for (int64_t kx = 0; kx < kw; ++kx) {
                                        const int64_t ix = ox + kx - pad_w;
                                        if (ix < 0 || ix >= width) continue;
                                        acc += static_cast<double>(plane[iy * width + ix]) * f[ky * kw + kx];
                                    }
                                }
                            }
                            float v = static_cast<float>(acc) * sp[oc];
                            v = v > 0.0f ? v : 0.0f;
                            best = v > best ? v : best;
                        }
                    }
                    out[((n * out_ch + oc) * pooled_h + py) * pooled_w + px] = best;
                }
            }
        }
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cpp_08_conv2d_scale_relu_maxpool",
    cpp_sources=CPP_SOURCE,
    functions=["conv_scale_relu_pool"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # Same parameters in the same order as the reference (conv first, then scale).
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_scale_relu_pool(x, self.conv.weight, self.conv.bias, self.scale)
