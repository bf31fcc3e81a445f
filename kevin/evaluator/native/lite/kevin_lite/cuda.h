// kevin's light stand-in for torch's CUDA helpers (streams, device guards, error checks); see torch.h.
#pragma once

#include <cuda_runtime_api.h>

#include "kevin_lite/torch.h"

namespace c10 {
namespace cuda {

class CUDAStream {
 public:
  CUDAStream(cudaStream_t stream, DeviceIndex index) : stream_(stream), index_(index) {}
  cudaStream_t stream() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT: implicit like c10
  DeviceIndex device_index() const { return index_; }
  Device device() const { return Device(DeviceType::CUDA, index_); }

 private:
  cudaStream_t stream_;
  DeviceIndex index_;
};

inline CUDAStream getCurrentCUDAStream(DeviceIndex device_index = -1) {
  int8_t resolved = -1;
  void* stream = kvl_cuda_current_stream(device_index, &resolved);
  return CUDAStream(static_cast<cudaStream_t>(stream), resolved);
}
inline CUDAStream getDefaultCUDAStream(DeviceIndex device_index = -1) {
  int8_t resolved = -1;
  void* stream = kvl_cuda_default_stream(device_index, &resolved);
  return CUDAStream(static_cast<cudaStream_t>(stream), resolved);
}
inline DeviceIndex current_device() { return kvl_cuda_current_device(); }

// The guards hold a real c10 guard made by the shim, so entering and leaving behave as torch's do.
class CUDAGuard {
 public:
  explicit CUDAGuard(Device device)
      : guard_(kvl_cuda_guard_new(static_cast<int8_t>(device.type()), device.index(), 0, 1)) {}
  explicit CUDAGuard(DeviceIndex index) : guard_(kvl_cuda_guard_new(static_cast<int8_t>(DeviceType::CUDA), index, 0, 1)) {}
  CUDAGuard(const CUDAGuard&) = delete;
  CUDAGuard& operator=(const CUDAGuard&) = delete;
  ~CUDAGuard() { kvl_cuda_guard_delete(guard_); }

 private:
  void* guard_;
};

class OptionalCUDAGuard {
 public:
  OptionalCUDAGuard() : guard_(kvl_cuda_guard_new(0, -1, 1, 0)) {}
  explicit OptionalCUDAGuard(std::optional<Device> device)
      : guard_(device ? kvl_cuda_guard_new(static_cast<int8_t>(device->type()), device->index(), 1, 1)
                      : kvl_cuda_guard_new(0, -1, 1, 0)) {}
  explicit OptionalCUDAGuard(Device device) : OptionalCUDAGuard(std::optional<Device>(device)) {}
  OptionalCUDAGuard(const OptionalCUDAGuard&) = delete;
  OptionalCUDAGuard& operator=(const OptionalCUDAGuard&) = delete;
  ~OptionalCUDAGuard() { kvl_cuda_guard_delete(guard_); }

 private:
  void* guard_;
};

}  // namespace cuda
}  // namespace c10

namespace at {
namespace cuda {
// torch's cached properties (the shim returns at::cuda's pointer).
inline cudaDeviceProp* getDeviceProperties(c10::DeviceIndex device) {
  return static_cast<cudaDeviceProp*>(kvl_cuda_device_properties(device));
}
inline cudaDeviceProp* getCurrentDeviceProperties() { return getDeviceProperties(-1); }
using c10::cuda::CUDAGuard;
using c10::cuda::CUDAStream;
using c10::cuda::current_device;
using c10::cuda::getCurrentCUDAStream;
using c10::cuda::getDefaultCUDAStream;
using c10::cuda::OptionalCUDAGuard;
}  // namespace cuda
}  // namespace at

#define C10_CUDA_CHECK(EXPR)                                                                         \
  do {                                                                                               \
    const cudaError_t __kevin_err = EXPR;                                                            \
    kvl_cuda_check(static_cast<int32_t>(__kevin_err), __FILE__, __func__, static_cast<uint32_t>(__LINE__)); \
  } while (0)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())
#define AT_CUDA_CHECK(EXPR) C10_CUDA_CHECK(EXPR)
