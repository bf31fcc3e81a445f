// kevin light header: torch's accumulation types (see kevin_lite/torch.h)
#pragma once
#include "kevin_lite/torch.h"

namespace at {
// What torch accumulates a type in: on CUDA, float stays float; on the CPU it becomes double.
template <typename T, bool is_cuda>
struct AccumulateType;
#define KEVIN_LITE_ACC(T, CUDA, CPU)              \
  template <>                                     \
  struct AccumulateType<T, true> { using type = CUDA; }; \
  template <>                                     \
  struct AccumulateType<T, false> { using type = CPU; };
KEVIN_LITE_ACC(c10::Half, float, float)
KEVIN_LITE_ACC(c10::BFloat16, float, float)
KEVIN_LITE_ACC(float, float, double)
KEVIN_LITE_ACC(double, double, double)
KEVIN_LITE_ACC(int8_t, int64_t, int64_t)
KEVIN_LITE_ACC(uint8_t, int64_t, int64_t)
KEVIN_LITE_ACC(int16_t, int64_t, int64_t)
KEVIN_LITE_ACC(int32_t, int64_t, int64_t)
KEVIN_LITE_ACC(int64_t, int64_t, int64_t)
KEVIN_LITE_ACC(bool, bool, bool)
#undef KEVIN_LITE_ACC
template <typename T, bool is_cuda>
using acc_type = typename AccumulateType<T, is_cuda>::type;
}  // namespace at
