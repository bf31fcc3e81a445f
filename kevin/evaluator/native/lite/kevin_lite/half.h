// kevin's light c10::Half and c10::BFloat16 (see torch.h): two-byte values with the layout, the
// conversions and the arithmetic of torch's (arithmetic goes through float, as torch's does).
//
// Under nvcc the CUDA half and bfloat16 headers come with them, as with torch's headers, so a
// candidate may use __half, __nv_bfloat16 and their intrinsics without including them itself; on
// the device the conversions are those headers' intrinsics (one instruction each, as in torch). On
// the host they are done here in software, rounding to nearest even like torch's.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define C10_HOST_DEVICE __host__ __device__
#define C10_DEVICE __device__
#define C10_HOST __host__
#else
#define C10_HOST_DEVICE
#define C10_DEVICE
#define C10_HOST
#endif
#define C10_WARP_SIZE 32
#define C10_RESTRICT __restrict__

namespace kevin_lite {

inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// IEEE binary16 from binary32, round to nearest even (NaN stays NaN, overflow gives infinity).
inline uint16_t half_bits_from_float(float value) {
  const uint32_t x = float_bits(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return static_cast<uint16_t>(sign | (magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  const uint32_t exponent = magnitude >> 23;
  if (exponent <= 112) {  // below 2^-14: a subnormal half (or zero)
    if (exponent < 102) return static_cast<uint16_t>(sign);
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;
    uint32_t result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = ((exponent - 112) << 10) | ((magnitude & 0x7fffffu) >> 13);
  const uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;  // a carry moves into the exponent
  return static_cast<uint16_t>(sign | result);
}

inline float float_from_half_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);
    exponent = 113;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --exponent;
    }
    return bits_float(sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13));
  }
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t bfloat16_bits_from_float(float value) {
  if (value != value) return 0x7fc0u;
  const uint32_t x = float_bits(value);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float float_from_bfloat16_bits(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

}  // namespace kevin_lite

namespace c10 {

struct alignas(2) Half {
  unsigned short x;

  struct from_bits_t {};
  C10_HOST_DEVICE static constexpr from_bits_t from_bits() { return from_bits_t(); }

  Half() = default;
  C10_HOST_DEVICE constexpr Half(unsigned short bits, from_bits_t) : x(bits) {}
  C10_HOST_DEVICE Half(float value) {  // NOLINT: implicit like c10
#if defined(__CUDA_ARCH__)
    x = static_cast<__half_raw>(__float2half(value)).x;
#else
    x = kevin_lite::half_bits_from_float(value);
#endif
  }
  C10_HOST_DEVICE operator float() const {  // NOLINT: implicit like c10
#if defined(__CUDA_ARCH__)
    __half_raw raw;
    raw.x = x;
    return __half2float(__half(raw));
#else
    return kevin_lite::float_from_half_bits(x);
#endif
  }
#if defined(__CUDACC__)
  C10_HOST_DEVICE Half(const __half& value) : x(static_cast<__half_raw>(value).x) {}  // NOLINT
  C10_HOST_DEVICE operator __half() const {  // NOLINT
    __half_raw raw;
    raw.x = x;
    return __half(raw);
  }
#endif
};

struct alignas(2) BFloat16 {
  uint16_t x;

  struct from_bits_t {};
  C10_HOST_DEVICE static constexpr from_bits_t from_bits() { return from_bits_t(); }

  BFloat16() = default;
  C10_HOST_DEVICE constexpr BFloat16(unsigned short bits, from_bits_t) : x(bits) {}
  C10_HOST_DEVICE BFloat16(float value) {  // NOLINT: implicit like c10
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    x = static_cast<__nv_bfloat16_raw>(__float2bfloat16(value)).x;
#else
    x = kevin_lite::bfloat16_bits_from_float(value);
#endif
  }
  C10_HOST_DEVICE operator float() const {  // NOLINT: implicit like c10
#if defined(__CUDA_ARCH__)
    return __uint_as_float(static_cast<unsigned int>(x) << 16);
#else
    return kevin_lite::float_from_bfloat16_bits(x);
#endif
  }
#if defined(__CUDACC__)
  C10_HOST_DEVICE BFloat16(const __nv_bfloat16& value) : x(static_cast<__nv_bfloat16_raw>(value).x) {}  // NOLINT
  C10_HOST_DEVICE operator __nv_bfloat16() const {  // NOLINT
    __nv_bfloat16_raw raw;
    raw.x = x;
    return __nv_bfloat16(raw);
  }
#endif
};

// Arithmetic as torch defines it: two reduced values give a reduced value (computed in float);
// with float or double the result is float or double; with an integer, a reduced value.
#define KEVIN_LITE_REDUCED_ARITHMETIC(R)                                                                           \
  C10_HOST_DEVICE inline R operator+(const R& a, const R& b) { return static_cast<float>(a) + static_cast<float>(b); } \
  C10_HOST_DEVICE inline R operator-(const R& a, const R& b) { return static_cast<float>(a) - static_cast<float>(b); } \
  C10_HOST_DEVICE inline R operator*(const R& a, const R& b) { return static_cast<float>(a) * static_cast<float>(b); } \
  C10_HOST_DEVICE inline R operator/(const R& a, const R& b) { return static_cast<float>(a) / static_cast<float>(b); } \
  C10_HOST_DEVICE inline R operator-(const R& a) { return -static_cast<float>(a); }                                  \
  C10_HOST_DEVICE inline R& operator+=(R& a, const R& b) { return a = a + b; }                                       \
  C10_HOST_DEVICE inline R& operator-=(R& a, const R& b) { return a = a - b; }                                       \
  C10_HOST_DEVICE inline R& operator*=(R& a, const R& b) { return a = a * b; }                                       \
  C10_HOST_DEVICE inline R& operator/=(R& a, const R& b) { return a = a / b; }                                       \
  C10_HOST_DEVICE inline float operator+(R a, float b) { return static_cast<float>(a) + b; }                         \
  C10_HOST_DEVICE inline float operator-(R a, float b) { return static_cast<float>(a) - b; }                         \
  C10_HOST_DEVICE inline float operator*(R a, float b) { return static_cast<float>(a) * b; }                         \
  C10_HOST_DEVICE inline float operator/(R a, float b) { return static_cast<float>(a) / b; }                         \
  C10_HOST_DEVICE inline float operator+(float a, R b) { return a + static_cast<float>(b); }                         \
  C10_HOST_DEVICE inline float operator-(float a, R b) { return a - static_cast<float>(b); }                         \
  C10_HOST_DEVICE inline float operator*(float a, R b) { return a * static_cast<float>(b); }                         \
  C10_HOST_DEVICE inline float operator/(float a, R b) { return a / static_cast<float>(b); }                         \
  C10_HOST_DEVICE inline float& operator+=(float& a, const R& b) { return a += static_cast<float>(b); }              \
  C10_HOST_DEVICE inline float& operator-=(float& a, const R& b) { return a -= static_cast<float>(b); }              \
  C10_HOST_DEVICE inline float& operator*=(float& a, const R& b) { return a *= static_cast<float>(b); }              \
  C10_HOST_DEVICE inline float& operator/=(float& a, const R& b) { return a /= static_cast<float>(b); }              \
  C10_HOST_DEVICE inline double operator+(R a, double b) { return static_cast<double>(a) + b; }                      \
  C10_HOST_DEVICE inline double operator-(R a, double b) { return static_cast<double>(a) - b; }                      \
  C10_HOST_DEVICE inline double operator*(R a, double b) { return static_cast<double>(a) * b; }                      \
  C10_HOST_DEVICE inline double operator/(R a, double b) { return static_cast<double>(a) / b; }                      \
  C10_HOST_DEVICE inline double operator+(double a, R b) { return a + static_cast<double>(b); }                      \
  C10_HOST_DEVICE inline double operator-(double a, R b) { return a - static_cast<double>(b); }                      \
  C10_HOST_DEVICE inline double operator*(double a, R b) { return a * static_cast<double>(b); }                      \
  C10_HOST_DEVICE inline double operator/(double a, R b) { return a / static_cast<double>(b); }                      \
  C10_HOST_DEVICE inline R operator+(R a, int b) { return a + static_cast<R>(b); }                                   \
  C10_HOST_DEVICE inline R operator-(R a, int b) { return a - static_cast<R>(b); }                                   \
  C10_HOST_DEVICE inline R operator*(R a, int b) { return a * static_cast<R>(b); }                                   \
  C10_HOST_DEVICE inline R operator/(R a, int b) { return a / static_cast<R>(b); }                                   \
  C10_HOST_DEVICE inline R operator+(int a, R b) { return static_cast<R>(a) + b; }                                   \
  C10_HOST_DEVICE inline R operator-(int a, R b) { return static_cast<R>(a) - b; }                                   \
  C10_HOST_DEVICE inline R operator*(int a, R b) { return static_cast<R>(a) * b; }                                   \
  C10_HOST_DEVICE inline R operator/(int a, R b) { return static_cast<R>(a) / b; }                                   \
  C10_HOST_DEVICE inline R operator+(R a, int64_t b) { return a + static_cast<R>(static_cast<float>(b)); }           \
  C10_HOST_DEVICE inline R operator-(R a, int64_t b) { return a - static_cast<R>(static_cast<float>(b)); }           \
  C10_HOST_DEVICE inline R operator*(R a, int64_t b) { return a * static_cast<R>(static_cast<float>(b)); }           \
  C10_HOST_DEVICE inline R operator/(R a, int64_t b) { return a / static_cast<R>(static_cast<float>(b)); }           \
  C10_HOST_DEVICE inline R operator+(int64_t a, R b) { return static_cast<R>(static_cast<float>(a)) + b; }           \
  C10_HOST_DEVICE inline R operator-(int64_t a, R b) { return static_cast<R>(static_cast<float>(a)) - b; }           \
  C10_HOST_DEVICE inline R operator*(int64_t a, R b) { return static_cast<R>(static_cast<float>(a)) * b; }           \
  C10_HOST_DEVICE inline R operator/(int64_t a, R b) { return static_cast<R>(static_cast<float>(a)) / b; }
KEVIN_LITE_REDUCED_ARITHMETIC(Half)
KEVIN_LITE_REDUCED_ARITHMETIC(BFloat16)
#undef KEVIN_LITE_REDUCED_ARITHMETIC

}  // namespace c10

// The limits torch gives its reduced types (finite ones from their bit patterns).
#define KEVIN_LITE_REDUCED_LIMITS(R, LOWEST, MAX, MIN, EPSILON, INFINITY_BITS, NAN_BITS, DIGITS)                   \
  template <>                                                                                                      \
  class numeric_limits<c10::R> {                                                                                   \
   public:                                                                                                         \
    static constexpr bool is_specialized = true;                                                                   \
    static constexpr bool is_signed = true;                                                                        \
    static constexpr bool is_integer = false;                                                                      \
    static constexpr bool is_exact = false;                                                                        \
    static constexpr bool has_infinity = true;                                                                     \
    static constexpr bool has_quiet_NaN = true;                                                                    \
    static constexpr int digits = DIGITS;                                                                          \
    static constexpr int radix = 2;                                                                                \
    C10_HOST_DEVICE static constexpr c10::R min() { return c10::R(MIN, c10::R::from_bits()); }                     \
    C10_HOST_DEVICE static constexpr c10::R lowest() { return c10::R(LOWEST, c10::R::from_bits()); }               \
    C10_HOST_DEVICE static constexpr c10::R max() { return c10::R(MAX, c10::R::from_bits()); }                     \
    C10_HOST_DEVICE static constexpr c10::R epsilon() { return c10::R(EPSILON, c10::R::from_bits()); }             \
    C10_HOST_DEVICE static constexpr c10::R infinity() { return c10::R(INFINITY_BITS, c10::R::from_bits()); }      \
    C10_HOST_DEVICE static constexpr c10::R quiet_NaN() { return c10::R(NAN_BITS, c10::R::from_bits()); }          \
  };
namespace std {
KEVIN_LITE_REDUCED_LIMITS(Half, 0xfbff, 0x7bff, 0x0400, 0x1400, 0x7c00, 0x7e00, 11)
KEVIN_LITE_REDUCED_LIMITS(BFloat16, 0xff7f, 0x7f7f, 0x0080, 0x3c00, 0x7f80, 0x7fc0, 8)
}  // namespace std
#undef KEVIN_LITE_REDUCED_LIMITS
