#include "compiler/program_log.h"

#include <atomic>
#include <mutex>

#include "ir/printer.h"

namespace tpu {
namespace {
std::atomic<bool> g_on{false};
std::mutex g_mu;
std::vector<std::pair<std::string, std::string>>* g_log = new std::vector<std::pair<std::string, std::string>>();
}  // namespace

void SetProgramLog(bool on) { g_on.store(on); }
bool ProgramLogEnabled() { return g_on.load(std::memory_order_relaxed); }

void LogProgram(const std::string& name, const Graph& graph) {
  if (!ProgramLogEnabled()) return;
  std::string text = PrintStableHlo(graph);
  std::lock_guard<std::mutex> lock(g_mu);
  g_log->emplace_back(name, std::move(text));
}

std::vector<std::pair<std::string, std::string>> TakeProgramLog() {
  std::lock_guard<std::mutex> lock(g_mu);
  auto out = std::move(*g_log);
  g_log->clear();
  return out;
}

}  // namespace tpu
