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
// (round to nearest even); integer sums wrap around as two's complement. `out` may alias
// in[0]. Thread-safe (no state).
void reduce(void* out, const void* const* in, int n, size_t count, DType dtype, Op op);

// Round-to-nearest-even conversions, bit for bit as c10::BFloat16 and c10::Half do them.
uint16_t floatToBf16(float value);
float bf16ToFloat(uint16_t bits);
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);

}  // namespace accel::shm
