// torch.tpu.memory's native half: the allocation history (Note [Memory history]) and the memory
// snapshot in the format of PyTorch's memory visualizer (torch.cuda._memory_viz), bound into _C.
#pragma once

#include <pybind11/pybind11.h>

namespace tpu::torch_bridge {

// _C._memory_record_history, _C._memory_snapshot, _C._set_memory_limit.
void BindMemory(pybind11::module_& m);

}  // namespace tpu::torch_bridge
