// kevin's shim: the real torch behind the light headers (kevin/native/lite), and the one Python
// binding every fast-built candidate shares.
//
// Built once per toolchain (torch version and install, compiler, CUDA) with the real headers; a
// candidate built against the light headers links to it. Each kvl_* function reinterprets the
// candidate's one-pointer tensor handle as the real at::Tensor it is (same layout, checked below)
// and calls the real API, so behaviour and error messages are torch's.
//
// `call(name, thunk, signature, *args)` replaces the pybind11 module load_inline would generate:
// it converts the Python arguments as pybind11 would for the declared C++ types, calls the
// candidate's generated thunk, and converts the result back. Errors from the candidate's code
// surface through torch::wrap_pybind_function exactly as in a load_inline module.
#include <torch/extension.h>

#ifdef KEVIN_SHIM_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <new>
#include <string>

#include "lite/kevin_lite/abi.h"  // by path: the light torch headers must not shadow the real ones here

static_assert(sizeof(at::Tensor) == sizeof(void*), "the light at::Tensor is one pointer");
static_assert(alignof(at::Tensor) == alignof(void*), "the light at::Tensor is one pointer");
static_assert(sizeof(at::Half) == 2 && sizeof(at::BFloat16) == 2, "the light Half and BFloat16 are two bytes");
static_assert(static_cast<int>(c10::ScalarType::Byte) == 0 && static_cast<int>(c10::ScalarType::Char) == 1 &&
                  static_cast<int>(c10::ScalarType::Short) == 2 && static_cast<int>(c10::ScalarType::Int) == 3 &&
                  static_cast<int>(c10::ScalarType::Long) == 4 && static_cast<int>(c10::ScalarType::Half) == 5 &&
                  static_cast<int>(c10::ScalarType::Float) == 6 && static_cast<int>(c10::ScalarType::Double) == 7 &&
                  static_cast<int>(c10::ScalarType::ComplexHalf) == 8 &&
                  static_cast<int>(c10::ScalarType::ComplexFloat) == 9 &&
                  static_cast<int>(c10::ScalarType::ComplexDouble) == 10 &&
                  static_cast<int>(c10::ScalarType::Bool) == 11 && static_cast<int>(c10::ScalarType::BFloat16) == 15,
              "the light ScalarType values match c10's");
static_assert(static_cast<int>(c10::DeviceType::CPU) == 0 && static_cast<int>(c10::DeviceType::CUDA) == 1,
              "the light DeviceType values match c10's");

namespace {

const at::Tensor& T(void* const* handle) { return *reinterpret_cast<const at::Tensor*>(handle); }

void put(void** out, at::Tensor value) { new (out) at::Tensor(std::move(value)); }

c10::IntArrayRef ints(const int64_t* values, size_t length) { return c10::IntArrayRef(values, length); }

at::TensorOptions options_from(const kvl_options* raw) {
  at::TensorOptions options;
  if (raw == nullptr) return options;
  if (raw->dtype >= 0) options = options.dtype(static_cast<c10::ScalarType>(raw->dtype));
  if (raw->device_type >= 0)
    options = options.device(c10::Device(static_cast<c10::DeviceType>(raw->device_type), raw->device_index));
  if (raw->requires_grad >= 0) options = options.requires_grad(raw->requires_grad != 0);
  return options;
}

at::Scalar scalar(double value, int integral) {
  if (integral) return at::Scalar(static_cast<int64_t>(value));
  return at::Scalar(value);
}

}  // namespace

extern "C" {

void kvl_undefined(void** out) { new (out) at::Tensor(); }
void kvl_copy(void** out, void* const* src) { new (out) at::Tensor(T(src)); }
void kvl_release(void** self) {
  if (*self == nullptr) return;  // a handle whose construction threw
  reinterpret_cast<at::Tensor*>(self)->~Tensor();
  *self = nullptr;
}
int kvl_defined(void* const* self) { return T(self).defined() ? 1 : 0; }
int64_t kvl_numel(void* const* self) { return T(self).numel(); }
int64_t kvl_dim(void* const* self) { return T(self).dim(); }
int64_t kvl_size(void* const* self, int64_t dim) { return T(self).size(dim); }
int64_t kvl_stride(void* const* self, int64_t dim) { return T(self).stride(dim); }
const int64_t* kvl_sizes(void* const* self, size_t* length) {
  auto sizes = T(self).sizes();
  *length = sizes.size();
  return sizes.data();
}
const int64_t* kvl_strides(void* const* self, size_t* length) {
  auto strides = T(self).strides();
  *length = strides.size();
  return strides.data();
}
int kvl_is_contiguous(void* const* self) { return T(self).is_contiguous() ? 1 : 0; }
int8_t kvl_scalar_type(void* const* self) { return static_cast<int8_t>(T(self).scalar_type()); }
void kvl_device(void* const* self, int8_t* type, int8_t* index) {
  const c10::Device device = T(self).device();
  *type = static_cast<int8_t>(device.type());
  *index = device.index();
}
int64_t kvl_element_size(void* const* self) { return T(self).element_size(); }
int64_t kvl_storage_offset(void* const* self) { return T(self).storage_offset(); }

void* kvl_data_ptr(void* const* self, int8_t expected, int mode) {
  const at::Tensor& t = T(self);
  if (expected < 0) {
    if (mode == KVL_CONST_DATA_PTR) return const_cast<void*>(t.const_data_ptr());
    if (mode == KVL_MUTABLE_DATA_PTR) return t.mutable_data_ptr();
    return t.data_ptr();
  }
#define KEVIN_SHIM_TYPED(type, name)                                                      \
  case c10::ScalarType::name:                                                             \
    if (mode == KVL_CONST_DATA_PTR) return const_cast<type*>(t.const_data_ptr<type>());   \
    if (mode == KVL_MUTABLE_DATA_PTR) return t.mutable_data_ptr<type>();                  \
    return t.data_ptr<type>();
  switch (static_cast<c10::ScalarType>(expected)) {
    KEVIN_SHIM_TYPED(uint8_t, Byte)
    KEVIN_SHIM_TYPED(int8_t, Char)
    KEVIN_SHIM_TYPED(int16_t, Short)
    KEVIN_SHIM_TYPED(int32_t, Int)
    KEVIN_SHIM_TYPED(int64_t, Long)
    KEVIN_SHIM_TYPED(float, Float)
    KEVIN_SHIM_TYPED(double, Double)
    KEVIN_SHIM_TYPED(bool, Bool)
    KEVIN_SHIM_TYPED(at::Half, Half)
    KEVIN_SHIM_TYPED(at::BFloat16, BFloat16)
    default:
      TORCH_CHECK(false, "kevin shim: data_ptr for an unsupported type");
  }
#undef KEVIN_SHIM_TYPED
}

void kvl_options_of(void* const* self, kvl_options* out) {
  const at::Tensor& t = T(self);
  out->dtype = static_cast<int8_t>(t.scalar_type());
  out->device_type = static_cast<int8_t>(t.device().type());
  out->device_index = t.device().index();
  out->requires_grad = -1;  // TensorBase::options() carries dtype, device and layout only
}

void kvl_shape_op(void** out, void* const* self, int op, const int64_t* values, size_t length) {
  const at::Tensor& t = T(self);
  switch (op) {
    case KVL_VIEW: put(out, t.view(ints(values, length))); return;
    case KVL_RESHAPE: put(out, t.reshape(ints(values, length))); return;
    case KVL_PERMUTE: put(out, t.permute(ints(values, length))); return;
    case KVL_EXPAND: put(out, t.expand(ints(values, length))); return;
    default: TORCH_CHECK(false, "kevin shim: unknown shape op ", op);
  }
}

void kvl_dim_op(void** out, void* const* self, int op, int64_t a, int64_t b, int64_t c) {
  const at::Tensor& t = T(self);
  switch (op) {
    case KVL_FLATTEN: put(out, t.flatten(a, b)); return;
    case KVL_UNSQUEEZE: put(out, t.unsqueeze(a)); return;
    case KVL_SQUEEZE_DIM: put(out, t.squeeze(a)); return;
    case KVL_SQUEEZE: put(out, t.squeeze()); return;
    case KVL_TRANSPOSE: put(out, t.transpose(a, b)); return;
    case KVL_NARROW: put(out, t.narrow(a, b, c)); return;
    case KVL_SELECT: put(out, t.select(a, b)); return;
    case KVL_T: put(out, t.t()); return;
    case KVL_CONTIGUOUS: put(out, t.contiguous()); return;
    case KVL_CLONE: put(out, t.clone()); return;
    default: TORCH_CHECK(false, "kevin shim: unknown op ", op);
  }
}

void kvl_to_dtype(void** out, void* const* self, int8_t dtype) {
  put(out, T(self).to(static_cast<c10::ScalarType>(dtype)));
}

void kvl_factory(void** out, int kind, const int64_t* sizes, size_t length, const kvl_options* raw, double value,
                 int integral) {
  const auto size = ints(sizes, length);
  const auto options = options_from(raw);
  switch (kind) {
    case KVL_EMPTY: put(out, torch::empty(size, options)); return;
    case KVL_ZEROS: put(out, torch::zeros(size, options)); return;
    case KVL_ONES: put(out, torch::ones(size, options)); return;
    case KVL_FULL: put(out, torch::full(size, scalar(value, integral), options)); return;
    default: TORCH_CHECK(false, "kevin shim: unknown factory ", kind);
  }
}

void kvl_factory_like(void** out, int kind, void* const* like, const kvl_options* raw, double value, int integral) {
  const at::Tensor& t = T(like);
  const auto options = options_from(raw);
  switch (kind) {
    case KVL_EMPTY: put(out, torch::empty_like(t, options)); return;
    case KVL_ZEROS: put(out, torch::zeros_like(t, options)); return;
    case KVL_ONES: put(out, torch::ones_like(t, options)); return;
    case KVL_FULL: put(out, torch::full_like(t, scalar(value, integral), options)); return;
    default: TORCH_CHECK(false, "kevin shim: unknown factory ", kind);
  }
}

void kvl_zero_(void* const* self) { const_cast<at::Tensor&>(T(self)).zero_(); }
void kvl_fill_(void* const* self, double value, int integral) {
  const_cast<at::Tensor&>(T(self)).fill_(scalar(value, integral));
}
void kvl_copy_(void* const* self, void* const* source) { const_cast<at::Tensor&>(T(self)).copy_(T(source)); }
double kvl_item_double(void* const* self) { return T(self).item<double>(); }
int64_t kvl_item_int(void* const* self) { return T(self).item<int64_t>(); }
const char* kvl_scalar_type_name(int8_t dtype) { return c10::toString(static_cast<c10::ScalarType>(dtype)); }

void kvl_check_fail(const char* func, const char* file, uint32_t line, const char* message) {
  c10::detail::torchCheckFail(func, file, line, std::string(message));
}

void kvl_dispatch_fail(const char* name, int8_t dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, '"', name, "\" not implemented for '",
                              c10::toString(static_cast<c10::ScalarType>(dtype)), "'");
  std::abort();  // unreachable: the check above throws
}

#ifdef KEVIN_SHIM_CUDA
}  // extern "C"

namespace {
// A guard of either kind behind one pointer, restored by its own destructor.
struct AnyGuard {
  virtual ~AnyGuard() = default;
};
template <typename Guard>
struct GuardBox final : AnyGuard {
  template <typename... Args>
  explicit GuardBox(Args&&... args) : guard(std::forward<Args>(args)...) {}
  Guard guard;
};
}  // namespace

extern "C" {

void* kvl_cuda_current_stream(int8_t device_index, int8_t* resolved_index) {
  const auto stream = c10::cuda::getCurrentCUDAStream(device_index);
  *resolved_index = stream.device_index();
  return static_cast<void*>(stream.stream());
}
void* kvl_cuda_default_stream(int8_t device_index, int8_t* resolved_index) {
  const auto stream = c10::cuda::getDefaultCUDAStream(device_index);
  *resolved_index = stream.device_index();
  return static_cast<void*>(stream.stream());
}
int8_t kvl_cuda_current_device(void) { return c10::cuda::current_device(); }
void* kvl_cuda_guard_new(int8_t device_type, int8_t device_index, int optional, int has_device) {
  const c10::Device device(static_cast<c10::DeviceType>(device_type), device_index);
  if (optional) {
    if (!has_device) return new GuardBox<c10::cuda::OptionalCUDAGuard>();
    return new GuardBox<c10::cuda::OptionalCUDAGuard>(std::optional<c10::Device>(device));
  }
  return new GuardBox<c10::cuda::CUDAGuard>(device);
}
void kvl_cuda_guard_delete(void* guard) { delete static_cast<AnyGuard*>(guard); }
void kvl_cuda_check(int32_t error, const char* file, const char* func, uint32_t line) {
  c10::cuda::c10_cuda_check_implementation(error, file, func, line, true);
}
void* kvl_cuda_device_properties(int8_t device_index) {
  return device_index < 0 ? at::cuda::getCurrentDeviceProperties() : at::cuda::getDeviceProperties(device_index);
}
#endif

}  // extern "C"

namespace {

namespace py = pybind11;

[[noreturn]] void incompatible(const std::string& name, const std::string& signature, const py::args& args) {
  std::string message = name + "(): incompatible function arguments. Expected (" + signature.substr(2) +
                        ") as declared in C++; invoked with " + std::to_string(args.size()) + " argument(s): " +
                        std::string(py::str(py::tuple(args)));
  throw py::type_error(message);
}

// signature: "<return>:<params>", one letter each. T tensor, d double, f float, l int64, i int,
// b bool; returns also v (void) and L (std::vector<at::Tensor>).
py::object call(const std::string& name, uint64_t thunk, const std::string& signature, py::args args) {
  constexpr size_t kMax = 16;
  const size_t arity = signature.size() - 2;
  if (args.size() != arity || arity > kMax) incompatible(name, signature, args);
  at::Tensor tensors[kMax];
  double doubles[kMax];
  int64_t longs[kMax];
  bool bools[kMax];
  void* pointers[kMax];
  for (size_t i = 0; i < arity; ++i) {
    PyObject* obj = args[i].ptr();
    switch (signature[2 + i]) {
      case 'T':
        if (!THPVariable_Check(obj)) incompatible(name, signature, args);
        tensors[i] = THPVariable_Unpack(obj);
        pointers[i] = &tensors[i];
        break;
      case 'd':
      case 'f': {
        double value = PyFloat_AsDouble(obj);
        if (value == -1.0 && PyErr_Occurred()) {
          PyErr_Clear();
          incompatible(name, signature, args);
        }
        doubles[i] = value;
        pointers[i] = &doubles[i];
        break;
      }
      case 'l':
      case 'i': {
        if (PyFloat_Check(obj)) incompatible(name, signature, args);
        int overflow = 0;
        PyObject* index = PyNumber_Index(obj);
        if (index == nullptr) {
          PyErr_Clear();
          incompatible(name, signature, args);
        }
        long long value = PyLong_AsLongLongAndOverflow(index, &overflow);
        Py_DECREF(index);
        if (overflow || (signature[2 + i] == 'i' && (value < INT32_MIN || value > INT32_MAX)))
          incompatible(name, signature, args);
        longs[i] = value;
        pointers[i] = &longs[i];
        break;
      }
      case 'b':
        if (obj == Py_True || obj == Py_False) {
          bools[i] = obj == Py_True;
        } else if (obj == Py_None) {
          bools[i] = false;
        } else if (Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_bool) {
          int truth = PyObject_IsTrue(obj);
          if (truth < 0) {
            PyErr_Clear();
            incompatible(name, signature, args);
          }
          bools[i] = truth != 0;
        } else {
          incompatible(name, signature, args);
        }
        pointers[i] = &bools[i];
        break;
      default:
        throw std::runtime_error("kevin shim: bad signature " + signature);
    }
  }
  auto function = reinterpret_cast<void (*)(void**, void*)>(static_cast<uintptr_t>(thunk));
  switch (signature[0]) {
    case 'T': {
      alignas(at::Tensor) unsigned char storage[sizeof(at::Tensor)];
      function(pointers, storage);
      at::Tensor* result = reinterpret_cast<at::Tensor*>(storage);
      at::Tensor value = std::move(*result);
      result->~Tensor();
      return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(value)));
    }
    case 'L': {
      alignas(std::vector<at::Tensor>) unsigned char storage[sizeof(std::vector<at::Tensor>)];
      function(pointers, storage);
      auto* result = reinterpret_cast<std::vector<at::Tensor>*>(storage);
      std::vector<at::Tensor> values = std::move(*result);
      result->~vector();
      py::list out;
      for (auto& value : values) out.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(value))));
      return out;
    }
    case 'd': {
      double value = 0;
      function(pointers, &value);
      return py::float_(value);
    }
    case 'l': {
      int64_t value = 0;
      function(pointers, &value);
      return py::int_(value);
    }
    case 'b': {
      bool value = false;
      function(pointers, &value);
      return py::bool_(value);
    }
    case 'v':
      function(pointers, nullptr);
      return py::none();
    default:
      throw std::runtime_error("kevin shim: bad signature " + signature);
  }
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("call", torch::wrap_pybind_function(call), "Call a fast-built candidate's function through its thunk.");
#ifdef KEVIN_SHIM_CUDA
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
}
