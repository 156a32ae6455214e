// Little binary writer/reader for the persistent formats (compile-cache entries, serialized
// programs): fixed-width little-endian integers and length-prefixed byte strings. The reader
// checks every length against what is left, so a truncated or corrupt input is an error, never a
// read past the end (fuzzed: csrc/fuzz/).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tpu {

class ByteWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void F64(double v) { Raw(&v, 8); }
  void Str(std::string_view s) {
    U64(s.size());
    out_.append(s.data(), s.size());
  }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  Status U8(uint8_t* v) { return Raw(v, 1); }
  Status U32(uint32_t* v) { return Raw(v, 4); }
  Status U64(uint64_t* v) { return Raw(v, 8); }
  Status I64(int64_t* v) { return Raw(v, 8); }
  Status F64(double* v) { return Raw(v, 8); }
  Status Str(std::string* s) {
    uint64_t n;
    TPU_RETURN_IF_ERROR(U64(&n));
    if (n > in_.size() - pos_) return InvalidArgument("truncated input: a string runs past the end");
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  // A count of items of at least `item_bytes` each: refuses counts the rest cannot hold.
  Status Count(uint64_t* n, size_t item_bytes) {
    TPU_RETURN_IF_ERROR(U64(n));
    if (item_bytes > 0 && *n > (in_.size() - pos_) / item_bytes) return InvalidArgument("corrupt input: a count is too large");
    return Status::Ok();
  }
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  Status Raw(void* p, size_t n) {
    if (n > in_.size() - pos_) return InvalidArgument("truncated input");
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace tpu
