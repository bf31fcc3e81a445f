/* The C boundary between a candidate built against kevin's light torch headers and kevin's shim.
 *
 * A candidate compiled with the light headers never sees a real torch header: its at::Tensor is a
 * one-pointer handle with the same layout and calling convention as the real at::Tensor (an
 * intrusive pointer to a TensorImpl), and every operation on it is one of the calls below. The
 * shim (kevin/native/shim.cpp) implements them with the real torch API, so what a call does, and
 * the errors it raises, are torch's own.
 *
 * A tensor argument is the address of the handle: `void* const*` to read it, `void**` for an
 * uninitialized handle the callee constructs. Options use -1 for "not set".
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVL_API __attribute__((visibility("default")))
#define KVL_NORETURN __attribute__((noreturn))

typedef struct kvl_options {
    int8_t dtype;         /* c10::ScalarType value, -1 unset */
    int8_t device_type;   /* c10::DeviceType value, -1 unset */
    int8_t device_index;  /* -1: none */
    int8_t requires_grad; /* -1 unset, 0, 1 */
} kvl_options;

enum { KVL_DATA_PTR = 0, KVL_CONST_DATA_PTR = 1, KVL_MUTABLE_DATA_PTR = 2 };
enum { KVL_VIEW = 0, KVL_RESHAPE = 1, KVL_PERMUTE = 2, KVL_EXPAND = 3 };
enum {
    KVL_FLATTEN = 0, KVL_UNSQUEEZE = 1, KVL_SQUEEZE_DIM = 2, KVL_TRANSPOSE = 3, KVL_NARROW = 4,
    KVL_SELECT = 5, KVL_SQUEEZE = 6, KVL_T = 7, KVL_CONTIGUOUS = 8, KVL_CLONE = 9
};
enum { KVL_EMPTY = 0, KVL_ZEROS = 1, KVL_ONES = 2, KVL_FULL = 3 };

KVL_API void kvl_undefined(void** out);
KVL_API void kvl_copy(void** out, void* const* src);
KVL_API void kvl_release(void** self);
KVL_API int kvl_defined(void* const* self);
KVL_API int64_t kvl_numel(void* const* self);
KVL_API int64_t kvl_dim(void* const* self);
KVL_API int64_t kvl_size(void* const* self, int64_t dim);
KVL_API int64_t kvl_stride(void* const* self, int64_t dim);
KVL_API const int64_t* kvl_sizes(void* const* self, size_t* length);
KVL_API const int64_t* kvl_strides(void* const* self, size_t* length);
KVL_API int kvl_is_contiguous(void* const* self);
KVL_API int8_t kvl_scalar_type(void* const* self);
KVL_API void kvl_device(void* const* self, int8_t* type, int8_t* index);
KVL_API int64_t kvl_element_size(void* const* self);
KVL_API int64_t kvl_storage_offset(void* const* self);
KVL_API void* kvl_data_ptr(void* const* self, int8_t expected, int mode);
KVL_API void kvl_options_of(void* const* self, kvl_options* out);
KVL_API void kvl_shape_op(void** out, void* const* self, int op, const int64_t* values, size_t length);
KVL_API void kvl_dim_op(void** out, void* const* self, int op, int64_t a, int64_t b, int64_t c);
KVL_API void kvl_to_dtype(void** out, void* const* self, int8_t dtype);
KVL_API void kvl_factory(void** out, int kind, const int64_t* sizes, size_t length, const kvl_options* options,
                         double value, int value_is_integral);
KVL_API void kvl_factory_like(void** out, int kind, void* const* like, const kvl_options* options, double value,
                              int value_is_integral);
KVL_API void kvl_zero_(void* const* self);
KVL_API void kvl_fill_(void* const* self, double value, int value_is_integral);
KVL_API void kvl_copy_(void* const* self, void* const* source);
KVL_API double kvl_item_double(void* const* self);
KVL_API int64_t kvl_item_int(void* const* self);
KVL_API const char* kvl_scalar_type_name(int8_t dtype);
KVL_API KVL_NORETURN void kvl_check_fail(const char* func, const char* file, uint32_t line, const char* message);
KVL_API KVL_NORETURN void kvl_dispatch_fail(const char* name, int8_t dtype);

/* CUDA: present only in a shim built against a CUDA torch. */
KVL_API void* kvl_cuda_current_stream(int8_t device_index, int8_t* resolved_index);
KVL_API void* kvl_cuda_default_stream(int8_t device_index, int8_t* resolved_index);
KVL_API int8_t kvl_cuda_current_device(void);
KVL_API void* kvl_cuda_guard_new(int8_t device_type, int8_t device_index, int optional, int has_device);
KVL_API void kvl_cuda_guard_delete(void* guard);
KVL_API void kvl_cuda_check(int32_t error, const char* file, const char* func, uint32_t line);
KVL_API void* kvl_cuda_device_properties(int8_t device_index); /* a cudaDeviceProp*; -1: current */

#ifdef __cplusplus
}
#endif
