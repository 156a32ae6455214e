// Optional log of newly compiled programs as StableHLO text (for tests that hand our programs to
// XLA, and for debugging). Off by default; costs nothing on cache hits.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace tpu {

void SetProgramLog(bool on);
bool ProgramLogEnabled();
void LogProgram(const std::string& name, const Graph& graph);
// Returns and clears the logged (name, StableHLO text) pairs.
std::vector<std::pair<std::string, std::string>> TakeProgramLog();

}  // namespace tpu
