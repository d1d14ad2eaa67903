// Compiled with -O3 (libaccel/CMakeLists.txt): these loops are what the shared-memory
// all-reduce spends its time in, and they must vectorise.
#include "libaccel/comm/shm_reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace accel::shm {
namespace {

// Rows of this many elements are combined across the inputs while they sit in L1.
constexpr size_t kBlock = 1024;

template <typename T>
struct Plain {
  using Acc = T;
  static Acc load(T v) { return v; }
  static T store(Acc v) { return v; }
};

struct Bf16 {
  using Acc = float;
  static float load(uint16_t v) { return bf16ToFloat(v); }
  static uint16_t store(float v) { return floatToBf16(v); }
};

struct F16 {
  using Acc = float;
  static float load(uint16_t v) { return halfToFloat(v); }
  static uint16_t store(float v) { return floatToHalf(v); }
};

uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

float floatOf(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Integer sums wrap (two's complement) like Gloo's, without signed-overflow undefined behaviour.
template <typename A>
A add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// streamCopy without its closing fence (the caller fences once after many).
void streamStores(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
#if defined(__SSE2__)
  // Up to the destination's first 16-byte boundary, and the tail, with memcpy.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const auto* from = reinterpret_cast<const __m128i*>(s + i);
    auto* to = reinterpret_cast<__m128i*>(d + i);
    const __m128i a = _mm_loadu_si128(from), b = _mm_loadu_si128(from + 1),
                  c = _mm_loadu_si128(from + 2), e = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, e);
  }
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  }
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(d, s, bytes);
#endif
}

// Streaming stores are weakly ordered: this makes them visible before whatever this thread
// publishes next (a sync point's counter).
void fenceStreams() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

template <typename T, typename Conv, Op kOp>
void reduceTyped(T* out, const T* const* in, int n, size_t count, char* mirror) {
  using Acc = typename Conv::Acc;
  Acc acc[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t len = std::min(kBlock, count - start);
    const T* first = in[0] + start;
    for (size_t i = 0; i < len; ++i) acc[i] = Conv::load(first[i]);
    for (int k = 1; k < n; ++k) {
      const T* src = in[k] + start;
      for (size_t i = 0; i < len; ++i) {
        const Acc v = Conv::load(src[i]);
        if constexpr (kOp == Op::Sum)
          acc[i] = add(acc[i], v);
        else if constexpr (kOp == Op::Max)
          acc[i] = acc[i] < v ? v : acc[i];
        else
          acc[i] = v < acc[i] ? v : acc[i];
      }
    }
    // Every input of the block is read before its output is written: `out` may alias any.
    T* dst = out + start;
    for (size_t i = 0; i < len; ++i) dst[i] = Conv::store(acc[i]);
    if (mirror) streamStores(mirror + start * sizeof(T), dst, len * sizeof(T));
  }
  if (mirror) fenceStreams();
}

template <typename T, typename Conv>
void reduceOp(void* out, const void* const* in, int n, size_t count, Op op, void* mirror) {
  auto* o = static_cast<T*>(out);
  auto* i = reinterpret_cast<const T* const*>(in);
  auto* m = static_cast<char*>(mirror);
  switch (op) {
    case Op::Sum:
      return reduceTyped<T, Conv, Op::Sum>(o, i, n, count, m);
    case Op::Max:
      return reduceTyped<T, Conv, Op::Max>(o, i, n, count, m);
    case Op::Min:
      return reduceTyped<T, Conv, Op::Min>(o, i, n, count, m);
  }
}

}  // namespace

// The bf16 wire's and the average's loops, compiled for AVX-512 and AVX2 besides the baseline,
// the best the CPU runs chosen when the library loads: for the wire rounding and widening are
// most of its time, and SSE2's 128 bits ran it about 3x slower than AVX-512 (1 MiB: 362 us
// against 108 on the 2-core VM).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ACCEL_WIDE_LOOPS \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ACCEL_WIDE_LOOPS
#endif

ACCEL_WIDE_LOOPS void toBf16(uint16_t* out, const float* in, size_t count, float scale) {
  for (size_t i = 0; i < count; ++i) out[i] = floatToBf16(in[i] * scale);
}

ACCEL_WIDE_LOOPS void fromBf16(float* out, const uint16_t* in, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = bf16ToFloat(in[i]);
}

ACCEL_WIDE_LOOPS void sumBf16Wire(float* out, const float* ownData, int own,
                                  const uint16_t* const* in, int n, size_t count, uint16_t* wire,
                                  float scale) {
  float acc[kBlock];
  uint16_t rounded[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t len = std::min(kBlock, count - start);
    for (int k = 0; k < n; ++k) {
      if (k == own) {
        const float* src = ownData + start;
        for (size_t i = 0; i < len; ++i) {
          const float v = bf16ToFloat(floatToBf16(src[i] * scale));
          acc[i] = k == 0 ? v : acc[i] + v;
        }
      } else {
        const uint16_t* src = in[k] + start;
        for (size_t i = 0; i < len; ++i) {
          const float v = bf16ToFloat(src[i]);
          acc[i] = k == 0 ? v : acc[i] + v;
        }
      }
    }
    // Every part of the block is read before its result is written: `out` may alias ownData.
    for (size_t i = 0; i < len; ++i) rounded[i] = floatToBf16(acc[i]);
    for (size_t i = 0; i < len; ++i) out[start + i] = bf16ToFloat(rounded[i]);
    if (wire) std::memcpy(wire + start, rounded, len * sizeof(uint16_t));
  }
}

ACCEL_WIDE_LOOPS void scaleCopy(float* dst, const float* src, float scale, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = src[i] * scale;
}

ACCEL_WIDE_LOOPS void sumOwnScaled(float* out, const float* const* in, int own, float scale, int n,
                                   size_t count) {
  float acc[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t len = std::min(kBlock, count - start);
    for (int k = 0; k < n; ++k) {
      const float* src = in[k] + start;
      const float by = k == own ? scale : 1.0f;  // x * 1.0f is x, bit for bit
      for (size_t i = 0; i < len; ++i) acc[i] = k == 0 ? src[i] * by : acc[i] + src[i] * by;
    }
    // Every part of the block is read before its sum is written: `out` may alias in[own].
    std::memcpy(out + start, acc, len * sizeof(float));
  }
}

void streamCopy(void* dst, const void* src, size_t bytes) {
  streamStores(dst, src, bytes);
  fenceStreams();
}

uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays a (quiet) NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// IEEE half without compiler support for _Float16 (clang on x86 has none): the branch-free
// conversions of the FP16 library, which c10::Half uses too, so results match torch's bit for bit.
uint16_t floatToHalf(float value) {
  const float scaleToInf = 0x1.0p+112f, scaleToZero = 0x1.0p-110f;
  float base = (std::fabs(value) * scaleToInf) * scaleToZero;
  const uint32_t w = bitsOf(value), shl1 = w + w, sign = w & 0x80000000u;
  uint32_t bias = shl1 & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = floatOf((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = bitsOf(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007c00u) + (bits & 0x00000fffu);
  return static_cast<uint16_t>((sign >> 16) | (shl1 > 0xff000000u ? 0x7e00u : nonsign));
}

float halfToFloat(uint16_t half) {
  const uint32_t w = static_cast<uint32_t>(half) << 16, sign = w & 0x80000000u, two = w + w;
  const float normalized = floatOf((two >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  const float denormalized = floatOf((two >> 17) | (126u << 23)) - 0.5f;
  return floatOf(sign | (two < (1u << 27) ? bitsOf(denormalized) : bitsOf(normalized)));
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::I8:
    case DType::U8:
      return 1;
    case DType::BF16:
    case DType::F16:
    case DType::I16:
      return 2;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F64:
    case DType::I64:
      return 8;
  }
  return 1;
}

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "float32";
    case DType::F64:
      return "float64";
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "float16";
    case DType::I8:
      return "int8";
    case DType::U8:
      return "uint8";
    case DType::I16:
      return "int16";
    case DType::I32:
      return "int32";
    case DType::I64:
      return "int64";
  }
  return "?";
}

void reduce(void* out, const void* const* in, int n, size_t count, DType dtype, Op op,
            void* mirror) {
  switch (dtype) {
    case DType::F32:
      return reduceOp<float, Plain<float>>(out, in, n, count, op, mirror);
    case DType::F64:
      return reduceOp<double, Plain<double>>(out, in, n, count, op, mirror);
    case DType::BF16:
      return reduceOp<uint16_t, Bf16>(out, in, n, count, op, mirror);
    case DType::F16:
      return reduceOp<uint16_t, F16>(out, in, n, count, op, mirror);
    case DType::I8:
      return reduceOp<int8_t, Plain<int8_t>>(out, in, n, count, op, mirror);
    case DType::U8:
      return reduceOp<uint8_t, Plain<uint8_t>>(out, in, n, count, op, mirror);
    case DType::I16:
      return reduceOp<int16_t, Plain<int16_t>>(out, in, n, count, op, mirror);
    case DType::I32:
      return reduceOp<int32_t, Plain<int32_t>>(out, in, n, count, op, mirror);
    case DType::I64:
      return reduceOp<int64_t, Plain<int64_t>>(out, in, n, count, op, mirror);
  }
}

}  // namespace accel::shm
