#pragma once
// The element-wise reductions of the shared-memory communicator, on raw memory. Torch-free.

#include <cstddef>
#include <cstdint>

namespace accel::shm {

enum class DType : uint8_t { F32, F64, BF16, F16, I8, U8, I16, I32, I64 };
enum class Op : uint8_t { Sum, Max, Min };

size_t dtypeSize(DType dtype);
const char* dtypeName(DType dtype);

// out[i] = in[0][i] ∘ in[1][i] ∘ ... ∘ in[n-1][i], combined in that order, so the result is the
// same on every run and every rank. bf16 and fp16 are accumulated in fp32 and rounded once
// (round to nearest even); integer sums wrap around as two's complement. `out` may alias any
// in[k]. With `mirror`, the result is also written there with streaming (non-temporal) stores,
// which leave the lines out of this core's cache: for a copy that other processes read next.
// Thread-safe (no state).
void reduce(void* out, const void* const* in, int n, size_t count, DType dtype, Op op,
            void* mirror = nullptr);

// memcpy with streaming stores (plain memcpy where the CPU has none): for bytes that another
// core reads next. Writing lines that another core holds in its cache costs a round trip per
// line to take them back; streaming stores skip it (1 MiB from one core to the other of the
// 2-core VM: 145 us plain, 39 us streamed), at the price of the copy not being in this core's
// cache.
void streamCopy(void* dst, const void* src, size_t bytes);

// A float32 all-reduce with bfloat16 on the wire (DDP's bf16_compress_hook): every rank's part
// rounded to bf16, the parts summed in fp32 in rank order, the sum rounded to bf16 once — the same
// bits as rounding into a bf16 tensor and all-reducing that. toBf16/fromBf16 convert n values;
// sumBf16Wire sums n ranks' wire parts `in` (in[own] is not read: `ownData`, in fp32, is rounded
// in its place; own < 0: every part from `in`) into `out` as fp32 (it may alias ownData) and,
// with `wire`, as bf16 there too. `scale` (the average's 1 / ranks; 1: none) multiplies each
// value before it is rounded — toBf16's, and sumBf16Wire's ownData — as scaling in a pass of its
// own would (x * 1.0f is x). Thread-safe (no state).
void toBf16(uint16_t* out, const float* in, size_t count, float scale = 1.0f);
void fromBf16(float* out, const uint16_t* in, size_t count);
void sumBf16Wire(float* out, const float* ownData, int own, const uint16_t* const* in, int n,
                 size_t count, uint16_t* wire, float scale = 1.0f);

// A float32 average: every rank's part multiplied by `scale` (1 / ranks), the products summed in
// rank order — the bits of scaling each part first (tensor.mul_(1.0 / ranks)) and summing.
// scaleCopy: dst[i] = src[i] * scale. sumOwnScaled: out[i] = Σ_k part_k[i] in k's order, where
// part_own = in[own][i] * scale (this rank's unscaled data; `out` may alias it) and the others'
// parts were scaled already. Thread-safe (no state).
void scaleCopy(float* dst, const float* src, float scale, size_t count);
void sumOwnScaled(float* out, const float* const* in, int own, float scale, int n, size_t count);

// Round-to-nearest-even conversions, bit for bit as c10::BFloat16 and c10::Half do them.
uint16_t floatToBf16(float value);
float bf16ToFloat(uint16_t bits);
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);

}  // namespace accel::shm
