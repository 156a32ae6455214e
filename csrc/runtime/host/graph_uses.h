// Who reads each value of a graph, and which values are results: what the planner's chain
// matchers (Note [Row chains], row_match.cc; Note [Region composites], composite.cc) ask before
// they let one kernel replace a chain of ops.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace tpu::host {

class GraphUses {
 public:
  explicit GraphUses(const Graph& g) : g_(g), np_(g.num_params()), users_(g.num_values()), result_(g.num_values()) {
    for (int i = 0; i < static_cast<int>(g.ops.size()); ++i)
      for (int o : g.ops[i].operands)
        if (users_[o].empty() || users_[o].back() != i) users_[o].push_back(i);
    for (int r : g.results) result_[r] = true;
  }

  // The op that produces v, or null for a parameter.
  const Op* Producer(int v) const { return v < np_ ? nullptr : &g_.ops[v - np_]; }
  int Value(int op) const { return np_ + op; }

  // The op indices that read v (each once).
  const std::vector<int>& Users(int v) const { return users_[v]; }
  // v is an intermediate only `n` ops read, and no result.
  bool Inner(int v, size_t n) const { return !result_[v] && users_[v].size() == n; }

 protected:
  const Graph& g_;
  const int np_;
  std::vector<std::vector<int>> users_;
  std::vector<bool> result_;
};

}  // namespace tpu::host
