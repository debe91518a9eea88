// Which ops a device backend declines because their dense weight did not fit its memory budget.
#pragma once

#include "backend/backend.h"

namespace coli {

// True when the op reads a dense weight from device memory and d.weight was left on the host (over a device
// backend's budget): the backend declines it, and it falls back to the CPU, counted.
bool weight_left_on_host(const OpDesc& d);

}  // namespace coli
