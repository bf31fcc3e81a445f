// kevin light header: torch's op-math types, reduced floats computed in float (see kevin_lite/torch.h)
#pragma once
#include "kevin_lite/torch.h"

namespace at {
template <typename T>
struct OpMathType {
  using type = T;
};
template <>
struct OpMathType<c10::Half> {
  using type = float;
};
template <>
struct OpMathType<c10::BFloat16> {
  using type = float;
};
template <typename T>
using opmath_type = typename OpMathType<T>::type;
}  // namespace at
