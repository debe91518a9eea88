// How the CPU backend stores tensors: a row-major float array behind Tensor::storage().
#pragma once

#include "backend/tensor.h"
#include "core/error.h"

namespace coli::cpu {

inline float* data(Tensor& t) {
    return static_cast<float*>(t.storage());
}
inline const float* data(const Tensor& t) {
    return static_cast<const float*>(t.storage());
}
inline float* row(Tensor& t, int64_t r) {
    return data(t) + r * t.cols();
}
inline const float* row(const Tensor& t, int64_t r) {
    return data(t) + r * t.cols();
}

using coli::check_shape;

}  // namespace coli::cpu
