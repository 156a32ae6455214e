// Runs a PJRT device's queue items (on its WorkerQueue's thread, in order): launches through
// PJRT_LoadedExecutable_Execute, copies as PJRT transfers. Note [PJRT buffer contents] says what
// a Buffer holds here.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/pjrt/compile.h"
#include "runtime/queue.h"

namespace tpu::pjrt {

class PjrtExecutor final : public Executor {
 public:
  PjrtExecutor(const Client* client, int device_index);
  ~PjrtExecutor() override;

  // Every binding is dense and covers its whole buffer (Backend::strided_bindings() is false);
  // inline scalars become device arrays. Waits for the run to finish, so an error at run time
  // (an index check's among them) is this launch's.
  // A failed launch fails all of its results (XLA runs a program whole).
  Status Run(const Launch& launch, RunReport* report) override;
  // A whole buffer is a new array; a part is a read-modify-write of the whole.
  Status Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes) override;
  Status Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) override;
  // A whole buffer is copied on the device; a part goes through the host.
  Status Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes) override;

 private:
  // Runs `exe` on this device; `outputs` receives its outputs (owned by the caller), after the
  // run has finished.
  Status Execute(const PjrtExecutable& exe, const std::vector<PJRT_Buffer*>& args,
                 const std::vector<int64_t>& non_donatable, std::vector<PJRT_Buffer*>* outputs);
  // The array of `b` with type `want`: its current one, or a reinterpretation of its bytes
  // (zeros when it was never written). With `replace` the new array becomes b's contents;
  // otherwise it is appended to `temps` for the caller to destroy.
  StatusOr<PJRT_Buffer*> ArrayFor(Buffer* b, const ArrayType& want, bool replace, std::vector<PJRT_Buffer*>* temps);
  // Makes `array` b's contents and destroys the previous array.
  void Replace(Buffer* b, void* array);
  StatusOr<PJRT_Buffer*> Reinterpret(PJRT_Buffer* array, const ArrayType& from, const ArrayType& to);
  // A device array holding an inline scalar binding's value (cached: PJRT arrays are immutable).
  StatusOr<PJRT_Buffer*> ScalarArray(const Binding& b);
  // The whole contents of `b` on the host (zeros when never written).
  Status ReadAll(Buffer* b, std::vector<char>* out);

  const Client* client_;
  const Api& api_;
  PJRT_Device* device_;
  // Held by Read (which runs on the reading thread) while it uses a buffer's array, and by
  // Replace while it swaps one, so a read never sees an array being destroyed.
  std::mutex contents_mu_;
  std::map<std::string, std::shared_ptr<const PjrtExecutable>> reinterpret_;
  std::map<std::string, PJRT_Buffer*> scalars_;
};

}  // namespace tpu::pjrt
