// The error for a tensor met on the wrong device: it names the op and the tensor and, for a CPU
// tensor that is a parameter or buffer of an nn.Module being called, which one and how to move
// it (model.to('tpu')), instead of a bare "found two devices".
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace tpu::torch_bridge {

// Throws RuntimeError: "<op>: expected all tensors to be on the same device (<expected>), but
// <what> (a Float tensor of shape [4, 3]) is on cpu. <which parameter, or how to move it>".
// `op` may be "".
[[noreturn]] void ThrowWrongDevice(const std::string& op, const at::Tensor& t, const std::string& expected,
                                   const char* what);

}  // namespace tpu::torch_bridge
