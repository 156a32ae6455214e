// Fusion and buffer planning: turns a verified Graph into an Executable's steps and slots.
// Elementwise ops over one iteration space join a region that runs as one tiled pass; layout
// ops become views computed at launch; everything else is a kernel step.
#pragma once

#include "base/status.h"
#include "runtime/executable.h"

namespace tpu {

Status PlanExecutable(Executable& exe);

}  // namespace tpu
