// Status / StatusOr: how the core reports errors without exceptions.
// The torch edge (csrc/torch) turns a non-OK Status into a Python exception.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace tpu {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // user mistake: shapes, dtypes, indices
  kOutOfRange,       // data-dependent index error found while running
  kResourceExhausted,  // device memory
  kUnimplemented,    // op/dtype combination the backend does not support
  kFailedPrecondition,  // the state does not allow it (a value a failed op never computed)
  kCancelled,        // the work was cancelled (an interrupt at a sync point)
  kInternal,         // a bug in torch_tpu
};

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;
  void IgnoreError() const {}

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status OutOfRange(std::string m) { return Status(Code::kOutOfRange, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(Code::kResourceExhausted, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(Code::kUnimplemented, std::move(m)); }
inline Status FailedPrecondition(std::string m) { return Status(Code::kFailedPrecondition, std::move(m)); }
inline Status Cancelled(std::string m) { return Status(Code::kCancelled, std::move(m)); }
inline Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tpu

#define TPU_CONCAT_INNER(a, b) a##b
#define TPU_CONCAT(a, b) TPU_CONCAT_INNER(a, b)

#define TPU_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::tpu::Status _st = (expr);            \
    if (!_st.ok()) return _st;             \
  } while (0)

#define TPU_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define TPU_ASSIGN_OR_RETURN(lhs, expr) \
  TPU_ASSIGN_OR_RETURN_IMPL(TPU_CONCAT(_statusor_, __LINE__), lhs, expr)

// A broken internal invariant: returns an Internal status naming the condition.
#define TPU_RET_CHECK(cond, msg)                                                    \
  do {                                                                              \
    if (!(cond))                                                                    \
      return ::tpu::Internal(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                             ": check failed: " #cond ": " + (msg));                \
  } while (0)
