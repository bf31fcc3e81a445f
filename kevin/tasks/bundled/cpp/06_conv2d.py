"""cpp candidate for tasks/06_conv2d.py: direct convolution, zero padding handled by bounds checks."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
torch::Tensor conv2d_same(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4, "conv2d_same: expected NCHW input and OIHW weight");
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t batch = input.size(0), in_ch = input.size(1), height = input.size(2), width = input.size(3);
    const int64_t out_ch = w.size(0), kh = w.size(2), kw = w.size(3);
    TORCH_CHECK(w.size(1) == in_ch, "conv2d_same: channel mismatch");
    const int64_t pad_h = kh / 2, pad_w = kw / 2;
    auto output = torch::empty({batch, out_ch, height, width}, input.options());
    const float* in = input.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t n = 0; n < batch; ++n) {
        for (int64_t oc = 0; oc < out_ch; ++oc) {
            const float* filt = wp + oc * in_ch * kh * kw;
            for (int64_t oy = 0; oy < height; ++oy) {
                for (int64_t ox = 0; ox < width; ++ox) {
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
                    out[((n * out_ch + oc) * height + oy) * width + ox] = static_cast<float>(acc);
                }
            }
        }
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cpp_06_conv2d",
    cpp_sources=CPP_SOURCE,
    functions=["conv2d_same"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # Owns the parameters only (same shapes and initialization as the reference); never called.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv2d_same(x, self.conv.weight, self.conv.bias)
