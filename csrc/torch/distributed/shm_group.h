// ShmGroup: the ranks of one process group on one host, exchanging through one POSIX shared
// memory segment (Note [Shared-memory collectives]).
//
// Note [Shared-memory collectives]: the segment holds a header (the futex word every wait sleeps
// on, the abort flag and its reason), one control block per rank (barrier arrivals, the
// descriptor of its current collective, alltoall splits), two data slots per rank (`chunk` bytes
// each, one per round parity) and a channel per ordered pair of ranks (point to point).
// A collective runs in rounds of at most one slot: the device queue reads each rank's bytes
// straight into its own slot (Queue::ReadInto), a host task checks the descriptors, reduces or
// waits as the collective needs, and the queue writes the results straight from the slots into
// the device (Queue::WriteFrom). Round k uses the slots of parity k % 2: a rank writes its slot of
// round k+2 only after it passed the first barrier of round k+1, which every rank reaches only
// after it finished reading round k -- so no barrier is needed at the end of a round, and the
// slots a round's results are written from stay unchanged until that rank's writes have run.
// Waits spin briefly, then sleep on a futex; they end when the condition holds, when any rank
// aborts the group (every waiter then raises the same reason), when a peer process dies, or at
// the deadline (the process group's timeout).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "torch/distributed/descriptor.h"
#include "torch/distributed/shm.h"

namespace tpu::dist {

struct Deadline {
  std::chrono::steady_clock::time_point at;
  double seconds;  // the timeout it was made from, for messages
  static Deadline After(double seconds);
};

class ShmGroup {
 public:
  static constexpr int kMaxRanks = 64;
  struct Config {
    int rank = 0;
    int world = 1;
    int64_t chunk = 4 << 20;  // bytes of one data slot
    std::string name;         // the process group's name, for messages
  };
  // Rank 0 creates the segment under `segment`; the others attach to it once it exists.
  static StatusOr<std::shared_ptr<ShmGroup>> Create(const Config& c, const std::string& segment);
  static StatusOr<std::shared_ptr<ShmGroup>> Attach(const Config& c, const std::string& segment);
  ~ShmGroup();
  // Removes the segment's name once every rank has attached.
  void Unlink() { seg_->Unlink(); }

  int rank() const { return rank_; }
  int world() const { return world_; }
  int64_t chunk() const { return chunk_; }
  const std::string& name() const { return name_; }
  // Rank r's data slot for group round `round`.
  char* Slot(int r, uint64_t round) const;
  // Issue time (the thread that issues collectives, in order): the next group round.
  uint64_t NextRound() { return next_round_++; }

  // ---- run time: the device queue's worker, in queue order -----------------------------------
  // Publishes `mine` (and, for all-to-all, `sends`: the bytes this rank sends to each rank) for
  // `round`, waits until every rank arrived and checks that all agree (Note [Collective
  // descriptors]); a disagreement aborts the group with a message naming every rank's side.
  Status Check(uint64_t round, const CollDesc& mine, const int64_t* sends, const Deadline& deadline);
  // What rank q published for `round` (valid after Check returned OK, until round + 2).
  const int64_t* Sends(int q, uint64_t round) const;
  // Every rank of the group got here (a second barrier inside one collective).
  Status Barrier(const CollDesc& mine, const Deadline& deadline);
  // Point to point, in message order per pair of ranks, through the pair's channel: a message of
  // at most kInlineBytes is copied into it; a larger one travels in its own segment, which the
  // sender made and filled (`segment`: its name) and the receiver removes. A send waits only
  // while kSlots messages to that rank are unreceived, so sends and receives in flight at once
  // (batch_isend_irecv, rings) never deadlock. Recv from src -1 takes the first pending message
  // with `tag` from any rank, and says who sent it.
  static constexpr int kSlots = 8;
  static constexpr int64_t kInlineBytes = 64 << 10;
  Status Send(int dst, int tag, const CollDesc& d, const char* data, int64_t n, const std::string& segment,
              const Deadline& deadline);
  Status Recv(int src, int tag, const CollDesc& d, char* out, int64_t n, const Deadline& deadline, int* from);

  // Every rank's waits on this group end with `why` (the first reason recorded wins, and is
  // returned); collectives issued later fail at once with it.
  Status Abort(const std::string& why);
  // The abort reason, or OK.
  Status Aborted() const;

 private:
  struct Header;
  struct RankCtl;
  struct Channel;
  ShmGroup(const Config& c, std::unique_ptr<ShmSegment> seg);
  static int64_t SegmentBytes(int world, int64_t chunk);
  Header* header() const;
  RankCtl* ctl(int r) const;
  Channel* channel(int src, int dst) const;
  void Wake();
  // Waits until blocker() returns -1 (done); otherwise it names the rank being waited for, whose
  // death or lateness `stall(rank, why)` words as the error.
  Status Wait(const std::function<int()>& blocker, const std::function<std::string(int)>& stall,
              const Deadline& deadline);
  std::string PeerState(int q) const;

  const int rank_, world_;
  const int64_t chunk_;
  const std::string name_;
  std::unique_ptr<ShmSegment> seg_;
  uint64_t next_round_ = 0;  // issue time
  uint64_t barriers_ = 0;    // run time: barriers this rank passed
};

}  // namespace tpu::dist
