// Note [Device timeline]: torch.profiler.profile(activities=[CPU, PrivateUse1]) shows what each
// tpu device's queue ran. The torch profiler drives Kineto; this file registers a Kineto child
// activity profiler (libkineto::IActivityProfiler) whose session, while the trace records,
// installs the queue's task observer (Note [Task observer] in runtime/worker_queue.h) and keeps
// one record per task the device ran: its program ("tpu aten::mm" for a lowered op, "tpu fused
// window" with the ops it holds), the user's line that issued it, its kind (launch / copy / host task) and its
// wall-clock interval. When the trace is processed the records become Kineto device activities
// (CONCURRENT_KERNEL for programs, GPU_MEMCPY for copies: torch maps those to the PrivateUse1
// device for a renamed backend) on process "tpu:N", linked to the CPU op that issued them
// through Kineto's correlation ids (pushCorrelationId, recorded on the issuing thread and carried
// by TaskContext::profile_id). So they appear in the Chrome/Perfetto trace beside the CPU ops, as
// the CPU ops' device time, and as device rows of prof.key_averages().
//
// While a session records, lowerings capture the user's line of every op (as they do for
// errors), which costs a Python frame walk per op: profiling slows the eager path somewhat.
#include "torch/profiler.h"

// Kineto's addMetadata() formats with fmt, which libtorch does not export: only addMetadataQuoted
// is used here.
#include <kineto/libkineto.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/worker_queue.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

std::atomic<bool> g_recording{false};

// Kineto's correlation ids of the ops open on this thread (innermost last).
thread_local std::vector<uint64_t> t_correlation;

struct DeviceTask {
  TaskRecord::Kind kind;
  int device;
  uint64_t seq;
  uint64_t correlation;
  int64_t start_ns, end_ns;
  int64_t nbytes;
  bool ok, ran_inline;
  std::string name;      // the program's op (or "fused window")
  std::string location;  // the user's line
  std::string ops;       // a fused window's ops, "aten::mul x2, aten::add"
};

std::string SummarizeOrigins(const std::vector<OpOrigin>& origins, std::string* first_location) {
  std::vector<std::pair<std::string, int>> counts;  // in first-seen order
  for (const OpOrigin& o : origins) {
    if (first_location->empty() && !o.location.empty()) *first_location = o.location;
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == o.op; });
    if (it == counts.end()) counts.emplace_back(o.op, 1);
    else ++it->second;
  }
  std::string out;
  for (const auto& [op, n] : counts) {
    if (!out.empty()) out += ", ";
    out += op;
    if (n > 1) out += " x" + std::to_string(n);
  }
  return out;
}

const char* KindName(TaskRecord::Kind k) {
  switch (k) {
    case TaskRecord::Kind::kTask: return "host task";
    case TaskRecord::Kind::kLaunch: return "program";
    case TaskRecord::Kind::kWrite: return "copy host to device";
    case TaskRecord::Kind::kCopy: return "copy device to device";
    case TaskRecord::Kind::kReadInto: return "copy device to host";
    case TaskRecord::Kind::kWriteFrom: return "copy host (pinned) to device";
  }
  return "";
}

class Recorder final : public TaskObserver {
 public:
  void OnTaskRun(const TaskRecord& r) override {
    DeviceTask t{r.kind, r.device, r.seq, r.ctx->profile_id, r.start_ns, r.end_ns, r.nbytes, r.ok, r.ran_inline,
                 r.ctx->op, r.ctx->location, {}};
    if (r.ctx->origins && !r.ctx->origins->empty()) t.ops = SummarizeOrigins(*r.ctx->origins, &t.location);
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(t));
  }
  std::vector<DeviceTask> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(tasks_);
  }

 private:
  std::mutex mu_;
  std::vector<DeviceTask> tasks_;
};

Recorder& GetRecorder() {
  static auto* recorder = new Recorder();  // the queues may report until they are gone
  return *recorder;
}

class TpuProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit TpuProfilerSession(bool active) : active_(active) {}
  ~TpuProfilerSession() override { Stop(); }

  void start() override {
    if (!active_) return;
    GetRecorder().Take();  // what an earlier session left
    start_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
    g_recording.store(true, std::memory_order_release);
    WorkerQueue::SetTaskObserver(&GetRecorder());
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override { Stop(); }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    if (!active_) return;
    std::vector<DeviceTask> tasks = GetRecorder().Take();
    if (!buffer_) buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_ns_, end_ns_, "torch_tpu device queue");
    for (const DeviceTask& t : tasks) {
      bool copy = t.kind != TaskRecord::Kind::kLaunch && t.kind != TaskRecord::Kind::kTask;
      auto a = std::make_unique<libkineto::GenericTraceActivity>(
          buffer_->span, copy ? libkineto::ActivityType::GPU_MEMCPY : libkineto::ActivityType::CONCURRENT_KERNEL,
          "tpu " + t.name);  // apart from the CPU op of the same name in key_averages()
      a->startTime = t.start_ns;
      a->endTime = t.end_ns;
      a->device = t.device;
      a->resource = 0;  // the device's one queue
      a->threadId = 0;
      a->id = static_cast<int32_t>(t.correlation);
      if (t.correlation && linked) a->linked = linked(static_cast<int32_t>(t.correlation));
      if (t.correlation) {
        a->flow.id = static_cast<uint32_t>(t.correlation);
        a->flow.type = libkineto::kLinkAsyncCpuGpu;
        a->flow.start = 0;
      }
      a->addMetadataQuoted("device", "tpu:" + std::to_string(t.device));
      a->addMetadataQuoted("op", t.name);
      a->addMetadataQuoted("kind", KindName(t.kind));
      a->addMetadataQuoted("queue seq", std::to_string(t.seq));
      if (!t.location.empty()) a->addMetadataQuoted("user line", t.location);
      if (!t.ops.empty()) a->addMetadataQuoted("ops", t.ops);
      if (copy) a->addMetadataQuoted("bytes", std::to_string(t.nbytes));
      if (t.ran_inline) a->addMetadataQuoted("ran", "inline on the issuing thread");
      if (!t.ok) a->addMetadataQuoted("status", "failed");
      a->log(logger);
      buffer_->activities.push_back(std::move(a));
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (!active_) return nullptr;
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "tpu:0", "tpu device queue"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    if (!active_) return {};
    std::vector<libkineto::ResourceInfo> out;
    for (int d = 0; d < GetBackend().device_count(); ++d)
      out.push_back(libkineto::ResourceInfo{0, d, d, "tpu:" + std::to_string(d) + " queue"});
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

 private:
  void Stop() {
    if (!active_ || !g_recording.load(std::memory_order_acquire)) return;
    WorkerQueue::SetTaskObserver(nullptr);
    g_recording.store(false, std::memory_order_release);
    end_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::system_clock::now().time_since_epoch()).count();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  bool active_;
  int64_t start_ns_ = 0, end_ns_ = 0;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

const std::set<libkineto::ActivityType> kTypes = {libkineto::ActivityType::CONCURRENT_KERNEL,
                                                   libkineto::ActivityType::GPU_MEMCPY,
                                                   libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                                   libkineto::ActivityType::PRIVATEUSE1_DRIVER};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return kTypes; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    // Every profile configures every child profiler: a CPU-only one asks for no device kernels
    // (PrivateUse1 adds CONCURRENT_KERNEL and the memcpy/memset types); record nothing then.
    bool wanted = types.count(libkineto::ActivityType::CONCURRENT_KERNEL) > 0;
    return std::make_unique<TpuProfilerSession>(wanted);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "torch_tpu";
};

}  // namespace

bool DeviceProfiling() { return g_recording.load(std::memory_order_relaxed); }

uint64_t CurrentProfileId() { return t_correlation.empty() ? 0 : t_correlation.back(); }

void RegisterDeviceProfiler() {
  static std::once_flag once;
  std::call_once(once, [] {
    libkineto::api().registerProfilerFactory([] { return std::make_unique<TpuActivityProfiler>(); });
  });
}

}  // namespace tpu::torch_bridge
