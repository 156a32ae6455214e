// A backend for the compile cache's tests: "compiling" verifies and wraps the graph, and its
// persistent format is the program's name, so the cache's tiers are tested on their own.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "compiler/compiler.h"
#include "runtime/device.h"

namespace tpu {

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(std::string name = "fake", std::string version = "1")
      : name_(std::move(name)), version_(std::move(version)) {}
  std::string name() const override { return name_; }
  std::string version() const override { return version_; }
  std::string description() const override { return "test"; }
  int device_count() const override { return 0; }
  Device& device(int) override { std::abort(); }
  bool strided_bindings() const override { return false; }
  StatusOr<ExecutablePtr> Compile(const Graph& graph, const CompileOptions& options) override {
    Graph g = graph;
    TPU_RETURN_IF_ERROR(Optimize(g));
    ++compiles;
    return Make(graph, options.name);
  }
  StatusOr<std::string> Serialize(const Executable& exe) const override { return "fake:" + exe.name(); }
  StatusOr<ExecutablePtr> Deserialize(const std::string& bytes, const Graph& source,
                                      const CompileOptions&) const override {
    if (bytes.rfind("fake:", 0) != 0) return InvalidArgument("not a fake executable");
    ++loads;
    return Make(source, bytes.substr(5));
  }
  int compiles = 0;
  mutable int loads = 0;

 private:
  static ExecutablePtr Make(const Graph& graph, const std::string& name) {
    auto exe = std::make_shared<Executable>();
    exe->set_source(graph);
    exe->set_identity(Fingerprint(graph), name, EstimateWork(graph));
    return exe;
  }
  std::string name_, version_;
};

}  // namespace tpu
