// A Graph as bytes and back (the persistent compile cache stores programs this way). Reading
// validates everything it reads -- op codes, dtypes, operand ids, counts -- and then the verifier
// runs, so a corrupt entry is an error, never a malformed graph.
#pragma once

#include <string>

#include "base/bytes.h"
#include "ir/graph.h"

namespace tpu {

void WriteGraph(const Graph& g, ByteWriter& w);
StatusOr<Graph> ReadGraph(ByteReader& r);

}  // namespace tpu
