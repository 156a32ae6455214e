#include "torch/device_errors.h"

#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>

#include <sstream>

namespace tpu::torch_bridge {
namespace {

// torch_tpu._errors.describe_foreign_tensor(t): which nn.Module parameter or buffer of the
// calling Python frames `t` is, or "" (also when Python is not there or the lookup fails: the
// error is raised either way).
std::string DescribeInPython(const at::Tensor& t) {
  if (!Py_IsInitialized()) return "";
  PyGILState_STATE gil = PyGILState_Ensure();
  std::string result;
  PyObject* module = PyImport_ImportModule("torch_tpu._errors");
  PyObject* tensor = module ? THPVariable_Wrap(t) : nullptr;
  PyObject* text = tensor ? PyObject_CallMethod(module, "describe_foreign_tensor", "O", tensor) : nullptr;
  if (text && PyUnicode_Check(text)) {
    const char* s = PyUnicode_AsUTF8(text);
    if (s) result = s;
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(text);
  Py_XDECREF(tensor);
  Py_XDECREF(module);
  PyGILState_Release(gil);
  return result;
}

}  // namespace

void ThrowWrongDevice(const std::string& op, const at::Tensor& t, const std::string& expected, const char* what) {
  std::ostringstream msg;
  if (!op.empty()) msg << op << ": ";
  msg << "expected all tensors to be on the same device (" << expected << "), but " << what << " (a "
      << t.scalar_type() << " tensor of shape " << t.sizes() << ") is on " << t.device() << ".";
  std::string which = t.device().is_cpu() ? DescribeInPython(t) : "";
  if (!which.empty()) {
    msg << " " << which;
  } else if (t.device().is_cpu()) {
    msg << " Move it with .to('tpu'); if it belongs to a model (a parameter or buffer), move the model with "
           "model.to('tpu').";
  } else {
    msg << " Move it with .to('" << expected << "').";
  }
  TORCH_CHECK(false, msg.str());
}

}  // namespace tpu::torch_bridge
