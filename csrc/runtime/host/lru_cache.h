// A bounded, thread-safe LRU map for the oneDNN primitive caches (dot.cc, convolution.cc): the
// lock is held only to look up or insert, never while a primitive runs. Values are shared_ptrs,
// so an entry evicted while another thread still runs it stays alive until that run ends.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace tpu::host {

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}

  std::shared_ptr<Value> Find(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Inserts (or replaces) and returns the cached value; evicts the least recently used entries
  // past the capacity.
  std::shared_ptr<Value> Insert(const Key& key, std::shared_ptr<Value> value) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    order_.emplace_front(key, std::move(value));
    map_.emplace(key, order_.begin());
    while (map_.size() > capacity_) {
      map_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }

 private:
  using Item = std::pair<Key, std::shared_ptr<Value>>;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<Item> order_;
  std::unordered_map<Key, typename std::list<Item>::iterator, Hash> map_;
};

}  // namespace tpu::host
