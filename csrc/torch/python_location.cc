// Note [User line]: the user's line is the innermost frame that is not PyTorch's, torch_tpu's or
// Python's own. Those are recognised by where their files really live -- the torch and torch_tpu
// package directories and the standard library (third-party site-packages count as the user's) --
// never by a substring, so a script under .../torch/... is still the user's. torch_tpu passes the
// directories in when it registers the device (SetLibraryPaths).
#include "torch/python_location.h"

#include <Python.h>
#include <frameobject.h>

#include <utility>

namespace tpu::torch_bridge {
namespace {

// Written once with the GIL held (at registration); read with the GIL held.
std::vector<std::string>& Paths(int kind) {
  static std::vector<std::string> paths[3];  // packages, site-packages, stdlib
  return paths[kind];
}

bool Under(const std::string& file, int kind) {
  for (const auto& dir : Paths(kind))
    if (file.compare(0, dir.size(), dir) == 0) return true;
  return false;
}

bool IsLibraryFile(const char* f) {
  std::string file(f);
  if (file.rfind("<frozen", 0) == 0) return true;  // the interpreter's frozen stdlib modules
  if (Under(file, 0)) return true;                 // torch, torch_tpu
  if (Under(file, 1)) return false;                // other installed packages: the user's
  return Under(file, 2);                           // the standard library
}

}  // namespace

void SetLibraryPaths(std::vector<std::string> packages, std::vector<std::string> site,
                     std::vector<std::string> stdlib) {
  Paths(0) = std::move(packages);
  Paths(1) = std::move(site);
  Paths(2) = std::move(stdlib);
}

std::string UserSourceLocation() {
  if (!Py_IsInitialized()) return "";
  PyGILState_STATE gil = PyGILState_Ensure();
  std::string result;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    if (file && !IsLibraryFile(file)) {
      result = std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(frame));
      Py_DECREF(code);
      break;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
  return result;
}

}  // namespace tpu::torch_bridge
