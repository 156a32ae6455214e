#pragma once

#include <string>

namespace tpu::torch_bridge {

// "file.py:42" of the innermost Python frame outside torch and torch_tpu, or "" if none.
std::string UserSourceLocation();

}  // namespace tpu::torch_bridge
