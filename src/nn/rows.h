// Row helpers model code shares.
#pragma once

#include "backend/ops.h"

namespace coli {

// The last row of h, for the last position's logits.                   h: [n, d]; returns [1, d]
Tensor row_last(Ops& ops, const Tensor& h);

}  // namespace coli
