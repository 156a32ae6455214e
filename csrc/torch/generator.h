// The device generator: Philox (seed, offset), like CUDA's. A random op reserves an offset range
// and passes {seed, offset} to its program, so results depend only on the generator's state.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace tpu::torch_bridge {

class TpuGenerator : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex index);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  // Returns {seed, offset} for a draw of `numel` values and advances the offset.
  std::pair<uint64_t, uint64_t> Reserve(int64_t numel);

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_ = 67280421310721ULL;
  uint64_t offset_ = 0;
};

const at::Generator& DefaultGenerator(c10::DeviceIndex index);
// The generator to use for an op: the given one or the device default (locked by the caller).
TpuGenerator* GetGenerator(const std::optional<at::Generator>& gen, c10::DeviceIndex index);

}  // namespace tpu::torch_bridge
