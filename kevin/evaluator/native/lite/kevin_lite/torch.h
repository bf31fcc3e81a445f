// kevin's light stand-in for the part of the torch C++ API that kernel candidates use.
//
// Parsing the real torch headers is most of a load_inline build (nvcc's two front ends and the host
// compiler each spend ~15 s on them). This header declares the same names with the same layout
// (at::Tensor is one pointer with a non-trivial copy, exactly like the real one, so a function
// `torch::Tensor f(torch::Tensor)` has the same symbol and calling convention) and forwards every
// operation to kevin's shim, which runs the real torch code (see abi.h). It covers a deliberately
// narrow subset: anything else fails to compile, and kevin then rebuilds the candidate with the
// real headers, so such a candidate still builds, only slower, and its compile errors are the
// real build's. Nothing here computes on tensor data.
//
// Known differences from the real headers (none changes what a compiled candidate computes):
// * at::Tensor::dtype() returns the ScalarType (the real one returns a caffe2::TypeMeta); comparing
//   it with torch::kFloat32 works in both.
// * The namespaces are a little more permissive (at and torch see all of c10).
// * c10::Half and c10::BFloat16 convert in software on the host (bit for bit torch's rounding,
//   tests/evaluator/test_fastbuild.py compares them) and with CUDA's intrinsics on the device.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kevin_lite/abi.h"
#include "kevin_lite/accessor.h"
#include "kevin_lite/half.h"

#define KEVIN_LITE_TORCH 1

namespace c10 {

using DeviceIndex = int8_t;

// Values match c10::ScalarType (the shim static_asserts it).
enum class ScalarType : int8_t {
  Byte = 0, Char = 1, Short = 2, Int = 3, Long = 4, Half = 5, Float = 6, Double = 7,
  ComplexHalf = 8, ComplexFloat = 9, ComplexDouble = 10, Bool = 11, BFloat16 = 15,
  Undefined = 127,
};
constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kChar = ScalarType::Char;
constexpr ScalarType kShort = ScalarType::Short;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kLong = ScalarType::Long;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kDouble = ScalarType::Double;
constexpr ScalarType kBool = ScalarType::Bool;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;

inline const char* toString(ScalarType t) { return kvl_scalar_type_name(static_cast<int8_t>(t)); }

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;

class Device {
 public:
  Device(DeviceType type, DeviceIndex index = -1) : type_(type), index_(index) {}  // NOLINT: implicit like c10
  DeviceType type() const noexcept { return type_; }
  DeviceIndex index() const noexcept { return index_; }
  bool has_index() const noexcept { return index_ != -1; }
  bool is_cuda() const noexcept { return type_ == DeviceType::CUDA; }
  bool is_cpu() const noexcept { return type_ == DeviceType::CPU; }
  bool operator==(const Device& other) const noexcept { return type_ == other.type_ && index_ == other.index_; }
  bool operator!=(const Device& other) const noexcept { return !(*this == other); }
  std::string str() const {
    std::string out = type_ == DeviceType::CUDA ? "cuda" : "cpu";
    if (index_ != -1) out += ":" + std::to_string(static_cast<int>(index_));
    return out;
  }

 private:
  DeviceType type_;
  DeviceIndex index_;
};

template <typename T>
class ArrayRef {
 public:
  using value_type = T;
  using iterator = const T*;
  using const_iterator = const T*;
  using size_type = size_t;

  constexpr ArrayRef() : data_(nullptr), length_(0) {}
  constexpr ArrayRef(const T& one) : data_(&one), length_(1) {}  // NOLINT: implicit like c10
  constexpr ArrayRef(const T* data, size_t length) : data_(data), length_(length) {}
  constexpr ArrayRef(const T* begin, const T* end) : data_(begin), length_(end - begin) {}
  ArrayRef(const std::vector<T>& values) : data_(values.data()), length_(values.size()) {}  // NOLINT
  constexpr ArrayRef(const std::initializer_list<T>& values)  // NOLINT
      : data_(values.begin() == values.end() ? nullptr : values.begin()), length_(values.size()) {}
  template <size_t N>
  constexpr ArrayRef(const T (&values)[N]) : data_(values), length_(N) {}  // NOLINT

  constexpr const T* begin() const { return data_; }
  constexpr const T* end() const { return data_ + length_; }
  constexpr const T* data() const { return data_; }
  constexpr size_t size() const { return length_; }
  constexpr bool empty() const { return length_ == 0; }
  constexpr const T& operator[](size_t i) const { return data_[i]; }
  const T& at(size_t i) const {
    if (i >= length_) kvl_check_fail(__func__, __FILE__, __LINE__, "ArrayRef: invalid index");
    return data_[i];
  }
  const T& front() const { return at(0); }
  const T& back() const { return at(length_ - 1); }
  std::vector<T> vec() const { return std::vector<T>(data_, data_ + length_); }
  bool equals(ArrayRef other) const { return length_ == other.length_ && std::equal(begin(), end(), other.begin()); }

 private:
  const T* data_;
  size_t length_;
};
template <typename T>
bool operator==(ArrayRef<T> a, ArrayRef<T> b) { return a.equals(b); }
template <typename T>
bool operator!=(ArrayRef<T> a, ArrayRef<T> b) { return !a.equals(b); }
template <typename T>
bool operator==(const std::vector<T>& a, ArrayRef<T> b) { return b.equals(a); }
template <typename T>
bool operator==(ArrayRef<T> a, const std::vector<T>& b) { return a.equals(b); }
template <typename T>
bool operator!=(const std::vector<T>& a, ArrayRef<T> b) { return !b.equals(a); }
template <typename T>
bool operator!=(ArrayRef<T> a, const std::vector<T>& b) { return !a.equals(b); }
using IntArrayRef = ArrayRef<int64_t>;

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType dtype) { raw_.dtype = static_cast<int8_t>(dtype); }  // NOLINT: implicit like c10
  TensorOptions(Device device) { set_device(device); }                           // NOLINT
  TensorOptions(DeviceType type) { set_device(Device(type)); }                   // NOLINT
  explicit TensorOptions(const kvl_options& raw) : raw_(raw) {}

  TensorOptions dtype(ScalarType dtype) const {
    TensorOptions copy = *this;
    copy.raw_.dtype = static_cast<int8_t>(dtype);
    return copy;
  }
  TensorOptions device(Device device) const {
    TensorOptions copy = *this;
    copy.set_device(device);
    return copy;
  }
  TensorOptions device(DeviceType type, DeviceIndex index = -1) const { return device(Device(type, index)); }
  TensorOptions device_index(DeviceIndex index) const { return device(Device(DeviceType::CUDA, index)); }
  TensorOptions requires_grad(bool value) const {
    TensorOptions copy = *this;
    copy.raw_.requires_grad = value ? 1 : 0;
    return copy;
  }
  const kvl_options& raw() const { return raw_; }

 private:
  void set_device(Device device) {
    raw_.device_type = static_cast<int8_t>(device.type());
    raw_.device_index = device.index();
  }
  kvl_options raw_ = {-1, -1, -1, -1};
};

inline TensorOptions dtype(ScalarType value) { return TensorOptions().dtype(value); }
inline TensorOptions device(Device value) { return TensorOptions().device(value); }

}  // namespace c10

namespace kevin_lite {

inline void append(std::string& out, const char* value) { out += value ? value : "(null)"; }
inline void append(std::string& out, char* value) { append(out, static_cast<const char*>(value)); }
inline void append(std::string& out, const std::string& value) { out += value; }
inline void append(std::string& out, char value) { out += value; }
inline void append(std::string& out, bool value) { out += value ? '1' : '0'; }
template <typename T, typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
void append(std::string& out, T value) {
  out += std::to_string(value);
}
template <typename T, typename std::enable_if<std::is_floating_point<T>::value, int>::type = 0>
void append(std::string& out, T value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%g", static_cast<double>(value));  // what an ostream prints
  out += buffer;
}
inline void append(std::string& out, c10::ScalarType value) { out += c10::toString(value); }
inline void append(std::string& out, c10::Device value) { out += value.str(); }
inline void append(std::string& out, c10::IntArrayRef value) {
  out += '[';
  for (size_t i = 0; i < value.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(value[i]);
  }
  out += ']';
}

inline std::string str() { return std::string(); }
template <typename... Args>
std::string str(const Args&... args) {
  std::string out;
  (append(out, args), ...);
  return out;
}

[[noreturn]] inline void check_fail(const char* func, const char* file, uint32_t line, const char* condition) {
  // The real TORCH_CHECK's message when it is given none.
  std::string message = std::string("Expected ") + condition +
                        " to be true, but got false.  (Could this error message be improved?  If so, please "
                        "report an enhancement request to PyTorch.)";
  kvl_check_fail(func, file, line, message.c_str());
}
template <typename... Args>
[[noreturn]] void check_fail(const char* func, const char* file, uint32_t line, const char*, const Args&... args) {
  kvl_check_fail(func, file, line, str(args...).c_str());
}

template <typename T>
struct scalar_type_of;
#define KEVIN_LITE_SCALAR(type, name) \
  template <>                         \
  struct scalar_type_of<type> {       \
    static constexpr int8_t value = static_cast<int8_t>(c10::ScalarType::name); \
  };
KEVIN_LITE_SCALAR(uint8_t, Byte)
KEVIN_LITE_SCALAR(int8_t, Char)
KEVIN_LITE_SCALAR(int16_t, Short)
KEVIN_LITE_SCALAR(int32_t, Int)
KEVIN_LITE_SCALAR(int64_t, Long)
KEVIN_LITE_SCALAR(float, Float)
KEVIN_LITE_SCALAR(double, Double)
KEVIN_LITE_SCALAR(bool, Bool)
KEVIN_LITE_SCALAR(c10::Half, Half)
KEVIN_LITE_SCALAR(c10::BFloat16, BFloat16)
#undef KEVIN_LITE_SCALAR

}  // namespace kevin_lite

#define TORCH_CHECK(cond, ...)                                                                       \
  if (__builtin_expect(!(cond), 0)) {                                                                \
    ::kevin_lite::check_fail(__func__, __FILE__, static_cast<uint32_t>(__LINE__), #cond, ##__VA_ARGS__); \
  }
#define TORCH_INTERNAL_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)

namespace at {
using namespace c10;

class Tensor {
 public:
  Tensor() noexcept { kvl_undefined(&impl_); }
  Tensor(const Tensor& other) { kvl_copy(&impl_, &other.impl_); }
  Tensor(Tensor&& other) noexcept : impl_(other.impl_) { kvl_undefined(&other.impl_); }
  Tensor& operator=(const Tensor& other) & {
    Tensor copy(other);
    std::swap(impl_, copy.impl_);
    return *this;
  }
  Tensor& operator=(Tensor&& other) & noexcept {
    std::swap(impl_, other.impl_);
    return *this;
  }
  ~Tensor() { kvl_release(&impl_); }

  bool defined() const { return kvl_defined(&impl_) != 0; }
  int64_t numel() const { return kvl_numel(&impl_); }
  int64_t dim() const { return kvl_dim(&impl_); }
  int64_t ndimension() const { return dim(); }
  int64_t size(int64_t dim) const { return kvl_size(&impl_, dim); }
  int64_t stride(int64_t dim) const { return kvl_stride(&impl_, dim); }
  IntArrayRef sizes() const {
    size_t length = 0;
    const int64_t* data = kvl_sizes(&impl_, &length);
    return IntArrayRef(data, length);
  }
  IntArrayRef strides() const {
    size_t length = 0;
    const int64_t* data = kvl_strides(&impl_, &length);
    return IntArrayRef(data, length);
  }
  bool is_contiguous() const { return kvl_is_contiguous(&impl_) != 0; }
  ScalarType scalar_type() const { return static_cast<ScalarType>(kvl_scalar_type(&impl_)); }
  ScalarType dtype() const { return scalar_type(); }
  Device device() const {
    int8_t type = 0, index = -1;
    kvl_device(&impl_, &type, &index);
    return Device(static_cast<DeviceType>(type), index);
  }
  DeviceIndex get_device() const { return is_cuda() ? device().index() : -1; }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  int64_t element_size() const { return kvl_element_size(&impl_); }
  int64_t itemsize() const { return element_size(); }
  int64_t nbytes() const { return numel() * element_size(); }
  int64_t storage_offset() const { return kvl_storage_offset(&impl_); }
  TensorOptions options() const {
    kvl_options raw;
    kvl_options_of(&impl_, &raw);
    return TensorOptions(raw);
  }

  void* data_ptr() const { return kvl_data_ptr(&impl_, -1, KVL_DATA_PTR); }
  const void* const_data_ptr() const { return kvl_data_ptr(&impl_, -1, KVL_CONST_DATA_PTR); }
  void* mutable_data_ptr() const { return kvl_data_ptr(&impl_, -1, KVL_MUTABLE_DATA_PTR); }
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(kvl_data_ptr(&impl_, kevin_lite::scalar_type_of<T>::value, KVL_DATA_PTR));
  }
  template <typename T, typename = typename std::enable_if<!std::is_const<T>::value>::type>
  const T* const_data_ptr() const {
    return static_cast<const T*>(kvl_data_ptr(&impl_, kevin_lite::scalar_type_of<T>::value, KVL_CONST_DATA_PTR));
  }
  template <typename T>
  T* mutable_data_ptr() const {
    return static_cast<T*>(kvl_data_ptr(&impl_, kevin_lite::scalar_type_of<T>::value, KVL_MUTABLE_DATA_PTR));
  }
  template <typename T>
  T item() const;

  // Accessors check the dimension (and, for 32-bit indices, the size) with torch's messages.
  template <typename T, size_t N>
  TensorAccessor<T, N> accessor() const& {
    static_assert(N > 0, "accessor is used for indexing tensor, for scalars use *data_ptr<T>()");
    TORCH_CHECK(dim() == static_cast<int64_t>(N), "TensorAccessor expected ", N, " dims but tensor has ", dim());
    return TensorAccessor<T, N>(data_ptr<T>(), sizes().data(), strides().data());
  }
  template <typename T, size_t N>
  TensorAccessor<T, N> accessor() && = delete;
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
  GenericPackedTensorAccessor<T, N, PtrTraits, index_t> generic_packed_accessor() const& {
    static_assert(N > 0, "accessor is used for indexing tensor, for scalars use *data_ptr<T>()");
    TORCH_CHECK(dim() == static_cast<int64_t>(N), "TensorAccessor expected ", N, " dims but tensor has ", dim());
    return GenericPackedTensorAccessor<T, N, PtrTraits, index_t>(
        static_cast<typename PtrTraits<T>::PtrType>(mutable_data_ptr<T>()), sizes().data(), strides().data());
  }
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
  GenericPackedTensorAccessor<T, N, PtrTraits, index_t> generic_packed_accessor() && = delete;
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
  PackedTensorAccessor32<T, N, PtrTraits> packed_accessor32() const& {
    TORCH_CHECK(numel() <= static_cast<int64_t>(std::numeric_limits<int32_t>::max()),
                "numel needs to be smaller than int32_t max; otherwise, please use packed_accessor64");
    return generic_packed_accessor<T, N, PtrTraits, int32_t>();
  }
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
  PackedTensorAccessor32<T, N, PtrTraits> packed_accessor32() && = delete;
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
  PackedTensorAccessor64<T, N, PtrTraits> packed_accessor64() const& {
    return generic_packed_accessor<T, N, PtrTraits, int64_t>();
  }
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
  PackedTensorAccessor64<T, N, PtrTraits> packed_accessor64() && = delete;

  Tensor contiguous() const { return dim_op(KVL_CONTIGUOUS, 0, 0, 0); }
  Tensor clone() const { return dim_op(KVL_CLONE, 0, 0, 0); }
  Tensor view(IntArrayRef size) const { return shape_op(KVL_VIEW, size); }
  Tensor reshape(IntArrayRef size) const { return shape_op(KVL_RESHAPE, size); }
  Tensor permute(IntArrayRef dims) const { return shape_op(KVL_PERMUTE, dims); }
  Tensor expand(IntArrayRef size) const { return shape_op(KVL_EXPAND, size); }
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const { return dim_op(KVL_FLATTEN, start_dim, end_dim, 0); }
  Tensor unsqueeze(int64_t dim) const { return dim_op(KVL_UNSQUEEZE, dim, 0, 0); }
  Tensor squeeze() const { return dim_op(KVL_SQUEEZE, 0, 0, 0); }
  Tensor squeeze(int64_t dim) const { return dim_op(KVL_SQUEEZE_DIM, dim, 0, 0); }
  Tensor transpose(int64_t dim0, int64_t dim1) const { return dim_op(KVL_TRANSPOSE, dim0, dim1, 0); }
  Tensor t() const { return dim_op(KVL_T, 0, 0, 0); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const { return dim_op(KVL_NARROW, dim, start, length); }
  Tensor select(int64_t dim, int64_t index) const { return dim_op(KVL_SELECT, dim, index, 0); }
  Tensor to(ScalarType dtype) const {
    Tensor out(Uninitialized{});
    kvl_to_dtype(&out.impl_, &impl_, static_cast<int8_t>(dtype));
    return out;
  }
  const Tensor& zero_() const {
    kvl_zero_(&impl_);
    return *this;
  }
  const Tensor& fill_(double value) const {
    kvl_fill_(&impl_, value, 0);
    return *this;
  }
  template <typename I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>
  const Tensor& fill_(I value) const {
    kvl_fill_(&impl_, static_cast<double>(value), 1);
    return *this;
  }
  const Tensor& copy_(const Tensor& source) const {
    kvl_copy_(&impl_, &source.impl_);
    return *this;
  }

  // For kevin_lite's factory functions: a handle the callee constructs.
  struct Uninitialized {};
  explicit Tensor(Uninitialized) noexcept : impl_(nullptr) {}
  void** raw_out() noexcept { return &impl_; }
  void* const* raw() const noexcept { return &impl_; }

 private:
  Tensor shape_op(int op, IntArrayRef values) const {
    Tensor out(Uninitialized{});
    kvl_shape_op(&out.impl_, &impl_, op, values.data(), values.size());
    return out;
  }
  Tensor dim_op(int op, int64_t a, int64_t b, int64_t c) const {
    Tensor out(Uninitialized{});
    kvl_dim_op(&out.impl_, &impl_, op, a, b, c);
    return out;
  }
  void* impl_;
};

template <>
inline float Tensor::item<float>() const { return static_cast<float>(kvl_item_double(&impl_)); }
template <>
inline double Tensor::item<double>() const { return kvl_item_double(&impl_); }
template <>
inline int64_t Tensor::item<int64_t>() const { return kvl_item_int(&impl_); }
template <>
inline int32_t Tensor::item<int32_t>() const { return static_cast<int32_t>(kvl_item_int(&impl_)); }

namespace kevin_lite_detail {
inline Tensor factory(int kind, IntArrayRef size, const TensorOptions& options, double value, int integral) {
  Tensor out{Tensor::Uninitialized{}};
  kvl_factory(out.raw_out(), kind, size.data(), size.size(), &options.raw(), value, integral);
  return out;
}
inline Tensor factory_like(int kind, const Tensor& like, const TensorOptions& options, double value, int integral) {
  Tensor out{Tensor::Uninitialized{}};
  kvl_factory_like(out.raw_out(), kind, like.raw(), &options.raw(), value, integral);
  return out;
}
}  // namespace kevin_lite_detail

inline Tensor empty(IntArrayRef size, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory(KVL_EMPTY, size, options, 0.0, 0);
}
inline Tensor zeros(IntArrayRef size, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory(KVL_ZEROS, size, options, 0.0, 0);
}
inline Tensor ones(IntArrayRef size, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory(KVL_ONES, size, options, 0.0, 0);
}
inline Tensor full(IntArrayRef size, double value, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory(KVL_FULL, size, options, value, 0);
}
template <typename I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>
Tensor full(IntArrayRef size, I value, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory(KVL_FULL, size, options, static_cast<double>(value), 1);
}
inline Tensor empty_like(const Tensor& like, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory_like(KVL_EMPTY, like, options, 0.0, 0);
}
inline Tensor zeros_like(const Tensor& like, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory_like(KVL_ZEROS, like, options, 0.0, 0);
}
inline Tensor ones_like(const Tensor& like, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory_like(KVL_ONES, like, options, 0.0, 0);
}
inline Tensor full_like(const Tensor& like, double value, const TensorOptions& options = {}) {
  return kevin_lite_detail::factory_like(KVL_FULL, like, options, value, 0);
}

inline std::optional<Device> device_of(const Tensor& t) {
  if (t.defined()) return t.device();
  return std::nullopt;
}

}  // namespace at

namespace torch {
using namespace at;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
}  // namespace torch


namespace kevin_lite {
inline c10::ScalarType dispatch_type(c10::ScalarType t) { return t; }
}  // namespace kevin_lite

#define KEVIN_LITE_DISPATCH_CASE(enum_value, type, ...) \
  case ::c10::ScalarType::enum_value: {                 \
    using scalar_t = type;                              \
    return __VA_ARGS__();                               \
  }
#define KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, CASES)                        \
  [&] {                                                                      \
    const ::c10::ScalarType _kevin_st = ::kevin_lite::dispatch_type(TYPE);   \
    switch (_kevin_st) {                                                     \
      CASES                                                                  \
      default:                                                               \
        kvl_dispatch_fail(NAME, static_cast<int8_t>(_kevin_st));             \
    }                                                                        \
  }()
#define AT_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)                   \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME,                              \
                             KEVIN_LITE_DISPATCH_CASE(Double, double, __VA_ARGS__) \
                             KEVIN_LITE_DISPATCH_CASE(Float, float, __VA_ARGS__))
#define AT_DISPATCH_INTEGRAL_TYPES(TYPE, NAME, ...)                        \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME,                                   \
                             KEVIN_LITE_DISPATCH_CASE(Byte, uint8_t, __VA_ARGS__) \
                             KEVIN_LITE_DISPATCH_CASE(Char, int8_t, __VA_ARGS__)  \
                             KEVIN_LITE_DISPATCH_CASE(Int, int32_t, __VA_ARGS__)  \
                             KEVIN_LITE_DISPATCH_CASE(Long, int64_t, __VA_ARGS__) \
                             KEVIN_LITE_DISPATCH_CASE(Short, int16_t, __VA_ARGS__))
#define AT_DISPATCH_ALL_TYPES(TYPE, NAME, ...)                              \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME,                                    \
                             KEVIN_LITE_DISPATCH_CASE(Byte, uint8_t, __VA_ARGS__) \
                             KEVIN_LITE_DISPATCH_CASE(Char, int8_t, __VA_ARGS__)  \
                             KEVIN_LITE_DISPATCH_CASE(Int, int32_t, __VA_ARGS__)  \
                             KEVIN_LITE_DISPATCH_CASE(Long, int64_t, __VA_ARGS__) \
                             KEVIN_LITE_DISPATCH_CASE(Short, int16_t, __VA_ARGS__) \
                             KEVIN_LITE_DISPATCH_CASE(Double, double, __VA_ARGS__) \
                             KEVIN_LITE_DISPATCH_CASE(Float, float, __VA_ARGS__))

// Dispatch over types named by the caller (at::kHalf, at::ScalarType::BFloat16, ...).
namespace kevin_lite {
template <c10::ScalarType>
struct cpp_type;
#define KEVIN_LITE_CPP_TYPE(type, name) \
  template <>                           \
  struct cpp_type<c10::ScalarType::name> { using t = type; };
KEVIN_LITE_CPP_TYPE(uint8_t, Byte)
KEVIN_LITE_CPP_TYPE(int8_t, Char)
KEVIN_LITE_CPP_TYPE(int16_t, Short)
KEVIN_LITE_CPP_TYPE(int32_t, Int)
KEVIN_LITE_CPP_TYPE(int64_t, Long)
KEVIN_LITE_CPP_TYPE(c10::Half, Half)
KEVIN_LITE_CPP_TYPE(float, Float)
KEVIN_LITE_CPP_TYPE(double, Double)
KEVIN_LITE_CPP_TYPE(bool, Bool)
KEVIN_LITE_CPP_TYPE(c10::BFloat16, BFloat16)
#undef KEVIN_LITE_CPP_TYPE
}  // namespace kevin_lite

#define AT_DISPATCH_CASE(enum_value, ...)                             \
  case enum_value: {                                                  \
    using scalar_t = typename ::kevin_lite::cpp_type<enum_value>::t; \
    return __VA_ARGS__();                                             \
  }
#define AT_DISPATCH_SWITCH(TYPE, NAME, ...) KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, __VA_ARGS__)
#define AT_DISPATCH_CASE_FLOATING_TYPES(...) \
  AT_DISPATCH_CASE(::c10::ScalarType::Double, __VA_ARGS__) AT_DISPATCH_CASE(::c10::ScalarType::Float, __VA_ARGS__)
#define AT_DISPATCH_CASE_FLOATING_TYPES_AND_HALF(...) \
  AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(::c10::ScalarType::Half, __VA_ARGS__)
#define AT_DISPATCH_CASE_REDUCED_FLOATING_TYPES(...) \
  AT_DISPATCH_CASE(::c10::ScalarType::Half, __VA_ARGS__) AT_DISPATCH_CASE(::c10::ScalarType::BFloat16, __VA_ARGS__)
#define AT_DISPATCH_CASE_INTEGRAL_TYPES(...)                                                                    \
  AT_DISPATCH_CASE(::c10::ScalarType::Byte, __VA_ARGS__) AT_DISPATCH_CASE(::c10::ScalarType::Char, __VA_ARGS__) \
  AT_DISPATCH_CASE(::c10::ScalarType::Int, __VA_ARGS__) AT_DISPATCH_CASE(::c10::ScalarType::Long, __VA_ARGS__)  \
  AT_DISPATCH_CASE(::c10::ScalarType::Short, __VA_ARGS__)
#define AT_DISPATCH_CASE_ALL_TYPES(...) \
  AT_DISPATCH_CASE_INTEGRAL_TYPES(__VA_ARGS__) AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__)

#define AT_DISPATCH_FLOATING_TYPES_AND_HALF(TYPE, NAME, ...) \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_FLOATING_TYPES_AND_HALF(__VA_ARGS__))
#define AT_DISPATCH_REDUCED_FLOATING_TYPES(TYPE, NAME, ...) \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_REDUCED_FLOATING_TYPES(__VA_ARGS__))
#define AT_DISPATCH_FLOATING_TYPES_AND(S1, TYPE, NAME, ...) \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(S1, __VA_ARGS__))
#define AT_DISPATCH_FLOATING_TYPES_AND2(S1, S2, TYPE, NAME, ...)                                     \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__)               \
                                             AT_DISPATCH_CASE(S1, __VA_ARGS__) AT_DISPATCH_CASE(S2, __VA_ARGS__))
#define AT_DISPATCH_FLOATING_TYPES_AND3(S1, S2, S3, TYPE, NAME, ...)                                               \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__)                             \
                                             AT_DISPATCH_CASE(S1, __VA_ARGS__) AT_DISPATCH_CASE(S2, __VA_ARGS__) \
                                                 AT_DISPATCH_CASE(S3, __VA_ARGS__))
#define AT_DISPATCH_INTEGRAL_TYPES_AND(S1, TYPE, NAME, ...) \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_INTEGRAL_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(S1, __VA_ARGS__))
#define AT_DISPATCH_ALL_TYPES_AND(S1, TYPE, NAME, ...) \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_ALL_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(S1, __VA_ARGS__))
#define AT_DISPATCH_ALL_TYPES_AND2(S1, S2, TYPE, NAME, ...)                                     \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_ALL_TYPES(__VA_ARGS__)               \
                                             AT_DISPATCH_CASE(S1, __VA_ARGS__) AT_DISPATCH_CASE(S2, __VA_ARGS__))
#define AT_DISPATCH_ALL_TYPES_AND3(S1, S2, S3, TYPE, NAME, ...)                                               \
  KEVIN_LITE_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_ALL_TYPES(__VA_ARGS__)                             \
                                             AT_DISPATCH_CASE(S1, __VA_ARGS__) AT_DISPATCH_CASE(S2, __VA_ARGS__) \
                                                 AT_DISPATCH_CASE(S3, __VA_ARGS__))
