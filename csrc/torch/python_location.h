#pragma once

#include <string>
#include <vector>

namespace tpu::torch_bridge {

// "file.py:42" of the innermost Python frame outside torch, torch_tpu and the standard library,
// or "" if none (Note [User line]).
std::string UserSourceLocation();

// The directories (each ending in '/') of torch's and torch_tpu's packages, of installed
// third-party packages, and of the standard library. Call with the GIL held, before ops run.
void SetLibraryPaths(std::vector<std::string> packages, std::vector<std::string> site,
                     std::vector<std::string> stdlib);

}  // namespace tpu::torch_bridge
