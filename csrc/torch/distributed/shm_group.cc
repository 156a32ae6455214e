#include "torch/distributed/shm_group.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/cpu_relax.h"

namespace tpu::dist {
namespace {

constexpr uint64_t kMagic = 0x7470'7564'6973'7431ULL;  // "tpudist1"
constexpr uint32_t kVersion = 1;
constexpr int64_t kHeaderBytes = 4096;
constexpr int64_t kCtlBytes = 4096;
constexpr int64_t kChannelCtlBytes = 4096;
using Clock = std::chrono::steady_clock;

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

}  // namespace

Deadline Deadline::After(double seconds) {
  return Deadline{Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)),
                  seconds};
}

struct ShmGroup::Header {
  uint64_t magic;
  uint32_t version;
  int32_t world;
  int64_t chunk, total;
  alignas(64) std::atomic<uint32_t> wake;  // bumped at every arrival, post and abort: waits sleep on it
  std::atomic<uint32_t> sleepers;
  alignas(64) std::atomic<uint32_t> abort;  // 0; 1 while the reason is written; 2 once readable
  int32_t abort_rank;
  char reason[3072];
};

struct ShmGroup::RankCtl {
  alignas(64) std::atomic<uint64_t> arrived;  // barriers this rank reached
  int32_t pid;
  CollDesc current;   // the collective this rank is in, or was in last (for messages)
  CollDesc desc[2];   // by round parity
  int64_t sends[2][kMaxRanks];
};

// One message of a channel: its header, and inline bytes or the name of its own segment.
struct Message {
  int32_t tag;
  int64_t total;
  CollDesc desc;
  char segment[64];  // empty: the bytes are in the channel's inline slot
};

struct ShmGroup::Channel {
  alignas(64) std::atomic<uint64_t> posted;    // messages the sender posted
  alignas(64) std::atomic<uint64_t> consumed;  // messages the receiver took
  Message messages[kSlots];
  char* inline_slot(uint64_t i) { return reinterpret_cast<char*>(this) + kChannelCtlBytes + (i % kSlots) * kInlineBytes; }
};

int64_t ShmGroup::SegmentBytes(int world, int64_t chunk) {
  return kHeaderBytes + world * kCtlBytes + 2 * world * chunk +
         int64_t{world} * world * (kChannelCtlBytes + kSlots * kInlineBytes);
}

ShmGroup::ShmGroup(const Config& c, std::unique_ptr<ShmSegment> seg)
    : rank_(c.rank), world_(c.world), chunk_(c.chunk), name_(c.name), seg_(std::move(seg)) {
  static_assert(sizeof(Header) <= kHeaderBytes, "header too large");
  static_assert(sizeof(RankCtl) <= kCtlBytes, "control block too large");
  static_assert(sizeof(Channel) <= kChannelCtlBytes, "channel header too large");
  ctl(rank_)->pid = static_cast<int32_t>(getpid());
}

ShmGroup::~ShmGroup() {
  // Large messages this rank sent that were never received: remove their segments.
  for (int dst = 0; dst < world_; ++dst) {
    if (dst == rank_) continue;
    Channel* ch = channel(rank_, dst);
    for (uint64_t i = ch->consumed.load(); i < ch->posted.load(); ++i) {
      const Message& m = ch->messages[i % kSlots];
      if (m.segment[0]) RemoveSegment(std::string(m.segment, strnlen(m.segment, sizeof(m.segment))));
    }
  }
}

StatusOr<std::shared_ptr<ShmGroup>> ShmGroup::Create(const Config& c, const std::string& segment) {
  if (c.world > kMaxRanks)
    return InvalidArgument("torch_tpu distributed: at most " + std::to_string(kMaxRanks) +
                           " ranks of a process group can share one host's memory, got " + std::to_string(c.world));
  if (c.chunk % 64) return InvalidArgument("the shared-memory chunk size must be a multiple of 64");
  int64_t total = SegmentBytes(c.world, c.chunk);
  TPU_ASSIGN_OR_RETURN(auto seg, ShmSegment::Create(segment, static_cast<size_t>(total)));
  auto* h = reinterpret_cast<Header*>(seg->data());
  h->version = kVersion;
  h->world = c.world;
  h->chunk = c.chunk;
  h->total = total;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  h->magic = kMagic;
  return std::shared_ptr<ShmGroup>(new ShmGroup(c, std::move(seg)));
}

StatusOr<std::shared_ptr<ShmGroup>> ShmGroup::Attach(const Config& c, const std::string& segment) {
  TPU_ASSIGN_OR_RETURN(auto seg, ShmSegment::Open(segment));
  auto* h = reinterpret_cast<Header*>(seg->data());
  if (seg->size() < static_cast<size_t>(kHeaderBytes) || h->magic != kMagic || h->version != kVersion ||
      h->world != c.world || h->total != static_cast<int64_t>(seg->size()))
    return Internal("shared memory segment " + segment + " is not this process group's (another torch_tpu version?)");
  Config mine = c;
  mine.chunk = h->chunk;  // rank 0's option value rules
  return std::shared_ptr<ShmGroup>(new ShmGroup(mine, std::move(seg)));
}

ShmGroup::Header* ShmGroup::header() const { return reinterpret_cast<Header*>(seg_->data()); }
ShmGroup::RankCtl* ShmGroup::ctl(int r) const {
  return reinterpret_cast<RankCtl*>(seg_->data() + kHeaderBytes + r * kCtlBytes);
}
char* ShmGroup::Slot(int r, uint64_t round) const {
  int64_t slots = kHeaderBytes + world_ * kCtlBytes;
  return seg_->data() + slots + (static_cast<int64_t>(round & 1) * world_ + r) * chunk_;
}
ShmGroup::Channel* ShmGroup::channel(int src, int dst) const {
  int64_t base = kHeaderBytes + world_ * kCtlBytes + 2 * world_ * chunk_;
  int64_t each = kChannelCtlBytes + kSlots * kInlineBytes;
  return reinterpret_cast<Channel*>(seg_->data() + base + (int64_t{src} * world_ + dst) * each);
}

const int64_t* ShmGroup::Sends(int q, uint64_t round) const { return ctl(q)->sends[round & 1]; }

void ShmGroup::Wake() {
  Header* h = header();
  h->wake.fetch_add(1, std::memory_order_seq_cst);
  if (h->sleepers.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&h->wake);
}

Status ShmGroup::Aborted() const {
  Header* h = header();
  uint32_t a = h->abort.load(std::memory_order_acquire);
  if (a == 0) return Status::Ok();
  while (a == 1) {  // the aborting rank is writing the reason
    std::this_thread::yield();
    a = h->abort.load(std::memory_order_acquire);
  }
  return FailedPrecondition(std::string(h->reason, strnlen(h->reason, sizeof(h->reason))));
}

Status ShmGroup::Abort(const std::string& why) {
  Header* h = header();
  uint32_t expected = 0;
  if (h->abort.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    h->abort_rank = rank_;
    SetText(h->reason, why);
    h->abort.store(2, std::memory_order_release);
    Wake();
  }
  return Aborted();
}

std::string ShmGroup::PeerState(int q) const {
  CollDesc d = ctl(q)->current;  // may be mid-update: only words for a message
  if (d.seq == 0) return "it has issued no collective on this process group yet";
  return "its last collective on this process group: " + Describe(d);
}

Status ShmGroup::Wait(const std::function<int()>& blocker, const std::function<std::string(int)>& stall,
                      const Deadline& deadline) {
  for (int i = 0; i < 512; ++i) {
    if (blocker() < 0) return Status::Ok();
    CpuRelax();
  }
  Header* h = header();
  auto next_check = Clock::now();
  for (;;) {
    uint32_t w = h->wake.load(std::memory_order_seq_cst);
    int q = blocker();
    if (q < 0) return Status::Ok();
    TPU_RETURN_IF_ERROR(Aborted());
    auto now = Clock::now();
    if (now >= deadline.at)
      return Abort("torch_tpu distributed: " + stall(q) + ": timed out after " + Seconds(deadline.seconds) +
                   " waiting for rank " + std::to_string(q) + " (" + PeerState(q) + ")");
    if (now >= next_check) {
      next_check = now + std::chrono::milliseconds(50);
      int pid = ctl(q)->pid;
      if (!ProcessAlive(pid))
        return Abort("torch_tpu distributed: " + stall(q) + ": rank " + std::to_string(q) + " (pid " +
                     std::to_string(pid) + ") exited or was killed (" + PeerState(q) + ")");
    }
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline.at - now).count();
    h->sleepers.fetch_add(1, std::memory_order_seq_cst);
    FutexWait(&h->wake, w, std::min<int64_t>(left + 1, 10000));
    h->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

namespace {
std::string InGroup(const CollDesc& d, const std::string& group) {
  return Describe(d) + " on process group '" + group + "'";
}
}  // namespace

Status ShmGroup::Check(uint64_t round, const CollDesc& mine, const int64_t* sends, const Deadline& deadline) {
  TPU_RETURN_IF_ERROR(Aborted());
  const int p = static_cast<int>(round & 1);
  RankCtl* me = ctl(rank_);
  me->desc[p] = mine;
  me->current = mine;
  if (sends) std::memcpy(me->sends[p], sends, sizeof(int64_t) * world_);
  const uint64_t target = ++barriers_;
  me->arrived.store(target, std::memory_order_seq_cst);
  Wake();
  TPU_RETURN_IF_ERROR(Wait(
      [&] {
        for (int q = 0; q < world_; ++q)
          if (ctl(q)->arrived.load(std::memory_order_seq_cst) < target) return q;
        return -1;
      },
      [&](int) { return "rank " + std::to_string(rank_) + " in " + InGroup(mine, name_); }, deadline));
  bool agree = true;
  for (int q = 0; q < world_; ++q) agree = agree && Agree(ctl(q)->desc[p], mine);
  if (!agree) {
    std::string msg = "torch_tpu distributed: the ranks of process group '" + name_ + "' issued different collectives:";
    for (int q = 0; q < world_; ++q) msg += " rank " + std::to_string(q) + ": " + Describe(ctl(q)->desc[p]) + ";";
    msg += " every rank must issue the same collectives (same op, sizes, dtype, reduction and root) in the same "
           "order on a process group";
    return Abort(msg);
  }
  for (int q = 0; q < world_; ++q)
    if (!ctl(q)->desc[p].valid)
      return Abort("torch_tpu distributed: rank " + std::to_string(q) + "'s input to " + InGroup(mine, name_) +
                   " holds no value: a device op that was to compute it failed (rank " + std::to_string(q) +
                   " reports that error)");
  return Status::Ok();
}

Status ShmGroup::Barrier(const CollDesc& mine, const Deadline& deadline) {
  TPU_RETURN_IF_ERROR(Aborted());
  const uint64_t target = ++barriers_;
  ctl(rank_)->arrived.store(target, std::memory_order_seq_cst);
  Wake();
  return Wait(
      [&] {
        for (int q = 0; q < world_; ++q)
          if (ctl(q)->arrived.load(std::memory_order_seq_cst) < target) return q;
        return -1;
      },
      [&](int) { return "rank " + std::to_string(rank_) + " in " + InGroup(mine, name_); }, deadline);
}

Status ShmGroup::Send(int dst, int tag, const CollDesc& d, const char* data, int64_t n, const std::string& segment,
                      const Deadline& deadline) {
  TPU_RETURN_IF_ERROR(Aborted());
  ctl(rank_)->current = d;
  Channel* ch = channel(rank_, dst);
  const uint64_t i = ch->posted.load(std::memory_order_relaxed);  // only this rank posts here
  TPU_RETURN_IF_ERROR(Wait(
      [&] { return i - ch->consumed.load(std::memory_order_seq_cst) < kSlots ? -1 : dst; },
      [&](int) {
        return "rank " + std::to_string(rank_) + " in " + InGroup(d, name_) + " (" + std::to_string(kSlots) +
               " earlier messages to rank " + std::to_string(dst) + " are not received yet)";
      },
      deadline));
  Message& m = ch->messages[i % kSlots];
  m.tag = tag;
  m.total = n;
  m.desc = d;
  SetText(m.segment, segment);
  if (segment.empty() && n > 0) std::memcpy(ch->inline_slot(i), data, static_cast<size_t>(n));
  ch->posted.store(i + 1, std::memory_order_seq_cst);
  Wake();
  return Status::Ok();
}

Status ShmGroup::Recv(int src, int tag, const CollDesc& d, char* out, int64_t n, const Deadline& deadline, int* from) {
  TPU_RETURN_IF_ERROR(Aborted());
  ctl(rank_)->current = d;
  auto pending = [&](int q) {
    Channel* ch = channel(q, rank_);
    return ch->posted.load(std::memory_order_seq_cst) > ch->consumed.load(std::memory_order_relaxed);
  };
  auto head = [&](int q) -> Message& {
    Channel* ch = channel(q, rank_);
    return ch->messages[ch->consumed.load(std::memory_order_relaxed) % kSlots];
  };
  int chosen = src;
  TPU_RETURN_IF_ERROR(Wait(
      [&] {
        if (src >= 0) return pending(src) ? -1 : src;
        for (int q = 0; q < world_; ++q)
          if (q != rank_ && pending(q) && head(q).tag == tag) {
            chosen = q;
            return -1;
          }
        return rank_ == 0 ? 1 : 0;  // any peer: liveness is checked on one of them
      },
      [&](int) {
        return "rank " + std::to_string(rank_) + " in " + InGroup(d, name_) +
               (src >= 0 ? " (waiting for the message)" : " (waiting for a message from any rank)");
      },
      deadline));
  if (from) *from = chosen;
  Channel* ch = channel(chosen, rank_);
  const uint64_t i = ch->consumed.load(std::memory_order_relaxed);
  Message& m = ch->messages[i % kSlots];
  const std::string segment(m.segment, strnlen(m.segment, sizeof(m.segment)));
  if (m.tag != tag || m.total != n || m.desc.dtype != d.dtype) {
    if (!segment.empty()) RemoveSegment(segment);
    std::string who = "rank " + std::to_string(chosen);
    std::string why = m.tag != tag ? who + "'s next message to rank " + std::to_string(rank_) + " has tag " +
                                         std::to_string(m.tag) + ", but rank " + std::to_string(rank_) +
                                         " receives with tag " + std::to_string(tag) +
                                         " (messages between two ranks are received in the order they were sent)"
                                   : std::string("their sizes or dtypes differ");
    return Abort("torch_tpu distributed: " + who + " sent " + Describe(m.desc) + " but rank " + std::to_string(rank_) +
                 " receives " + Describe(d) + " on process group '" + name_ + "': " + why);
  }
  if (segment.empty()) {
    if (n > 0) std::memcpy(out, ch->inline_slot(i), static_cast<size_t>(n));
  } else {
    auto seg = ShmSegment::Open(segment);
    RemoveSegment(segment);
    if (!seg.ok()) return Abort("torch_tpu distributed: receiving " + Describe(d) + ": " + seg.status().message());
    if (static_cast<int64_t>(seg.value()->size()) < n)
      return Abort("torch_tpu distributed: receiving " + Describe(d) + ": the message's segment is too small");
    std::memcpy(out, seg.value()->data(), static_cast<size_t>(n));
  }
  ch->consumed.store(i + 1, std::memory_order_seq_cst);
  Wake();
  return Status::Ok();
}

}  // namespace tpu::dist
