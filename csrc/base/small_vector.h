// SmallVector: a vector that keeps up to N elements inline. Shapes, strides and operand lists are
// short, and the eager path builds many of them per op: keeping them off the heap is most of the
// difference between a cheap and an expensive op dispatch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace tpu {

template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable values");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<T*>;
  using const_reverse_iterator = std::reverse_iterator<const T*>;
  using size_type = size_t;

  SmallVector() = default;
  SmallVector(size_t n, const T& v = T()) { assign(n, v); }
  SmallVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  template <typename It, typename = decltype(*std::declval<It&>(), ++std::declval<It&>())>
  SmallVector(It first, It last) { assign(first, last); }
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit by design
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { MoveFrom(std::move(o)); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      Release();
      MoveFrom(std::move(o));
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }
  ~SmallVector() { Release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  T& operator[](size_t i) { return ptr_[i]; }
  const T& operator[](size_t i) const { return ptr_[i]; }
  T& at(size_t i) { return ptr_[CheckIndex(i)]; }
  const T& at(size_t i) const { return ptr_[CheckIndex(i)]; }
  T& front() { return ptr_[0]; }
  const T& front() const { return ptr_[0]; }
  T& back() { return ptr_[size_ - 1]; }
  const T& back() const { return ptr_[size_ - 1]; }
  iterator begin() { return ptr_; }
  iterator end() { return ptr_ + size_; }
  const_iterator begin() const { return ptr_; }
  const_iterator end() const { return ptr_ + size_; }
  const_iterator cbegin() const { return ptr_; }
  const_iterator cend() const { return ptr_ + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void reserve(size_t n) {
    if (n > cap_) Grow(n);
  }
  void clear() { size_ = 0; }
  void push_back(const T& v) {
    if (size_ == cap_) {
      T copy = v;  // v may live in this vector
      Grow(cap_ * 2);
      ptr_[size_++] = copy;
      return;
    }
    ptr_[size_++] = v;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void pop_back() { --size_; }
  void resize(size_t n, const T& v = T()) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) ptr_[i] = v;
    size_ = n;
  }
  void assign(size_t n, const T& v) {
    size_ = 0;
    resize(n, v);
  }
  template <typename It>
  void assign(It first, It last) {
    size_t n = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    reserve(n);
    std::copy(first, last, ptr_);
    size_ = n;
  }
  iterator insert(const_iterator pos, const T& v) { return insert(pos, &v, &v + 1); }
  template <typename It>
  iterator insert(const_iterator pos, It first, It last) {
    size_t at = static_cast<size_t>(pos - ptr_);
    size_t n = static_cast<size_t>(std::distance(first, last));
    SmallVector tmp(first, last);  // the source may alias this vector
    reserve(size_ + n);
    std::memmove(ptr_ + at + n, ptr_ + at, (size_ - at) * sizeof(T));
    std::copy(tmp.begin(), tmp.end(), ptr_ + at);
    size_ += n;
    return ptr_ + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    size_t a = static_cast<size_t>(first - ptr_), b = static_cast<size_t>(last - ptr_);
    std::memmove(ptr_ + a, ptr_ + b, (size_ - b) * sizeof(T));
    size_ -= b - a;
    return ptr_ + a;
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const SmallVector& a, const SmallVector& b) { return !(a == b); }
  friend bool operator<(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  size_t CheckIndex(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector index out of range");
    return i;
  }
  void Grow(size_t n) {
    n = std::max<size_t>(n, N * 2);
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    std::memcpy(p, ptr_, size_ * sizeof(T));
    Release();
    ptr_ = p;
    cap_ = n;
  }
  void Release() {
    if (ptr_ != inline_) ::operator delete(ptr_);
    ptr_ = inline_;
    cap_ = N;
  }
  void MoveFrom(SmallVector&& o) {
    if (o.ptr_ == o.inline_) {
      std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
      ptr_ = inline_;
      cap_ = N;
    } else {
      ptr_ = o.ptr_;
      cap_ = o.cap_;
      o.ptr_ = o.inline_;
      o.cap_ = N;
    }
    size_ = o.size_;
    o.size_ = 0;
  }

  T* ptr_ = inline_;
  size_t size_ = 0;
  size_t cap_ = N;
  T inline_[N];
};

}  // namespace tpu
