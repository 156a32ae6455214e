#include "torch/python_location.h"

#include <Python.h>
#include <frameobject.h>

namespace tpu::torch_bridge {
namespace {
bool IsLibraryFile(const char* f) {
  std::string s(f);
  return s.find("/torch/") != std::string::npos || s.find("/torch_tpu/") != std::string::npos ||
         s.rfind("<frozen", 0) == 0;
}
}  // namespace

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
