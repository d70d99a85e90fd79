// A vector whose copies share their elements until one of them changes (copy-on-write), in chunks: copying it
// costs one reference count, and changing element i in a copy copies only the chunk table (one pointer per
// chunk_size elements) and the chunk holding i. Metadata images hold their topics' partitions in it, so that
// a new image (every committed metadata record batch) shares every partition it does not change with the
// image before it, as Kafka's persistent image maps do, instead of copying all of them.
//
// Reads (size, operator[] const, const iteration) never copy. Writes go through the non-const operator[],
// push_back, emplace_back, resize and clear, which first make the touched parts this object's own. Iteration
// is const only, so that a loop cannot copy every chunk by accident. Not synchronized: a copy held by another
// thread is never modified through this one, which is all an immutable image needs.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace mala {

template <typename T, size_t chunk_size = 64>
class chunked_cow_vector {
  using chunk = std::vector<T>;  // holds at most chunk_size elements; only the last may hold fewer
  using chunk_table = std::vector<std::shared_ptr<chunk>>;

 public:
  using value_type = T;
  using size_type = size_t;

  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;

    const_iterator() = default;
    const_iterator(const chunked_cow_vector* owner, size_t index) : _owner(owner), _index(index) {}
    reference operator*() const { return (*_owner)[_index]; }
    pointer operator->() const { return &(*_owner)[_index]; }
    reference operator[](difference_type n) const { return (*_owner)[_index + n]; }
    const_iterator& operator++() {
      ++_index;
      return *this;
    }
    const_iterator operator++(int) { return {_owner, _index++}; }
    const_iterator& operator--() {
      --_index;
      return *this;
    }
    const_iterator operator--(int) { return {_owner, _index--}; }
    const_iterator& operator+=(difference_type n) {
      _index += n;
      return *this;
    }
    const_iterator& operator-=(difference_type n) {
      _index -= n;
      return *this;
    }
    friend const_iterator operator+(const_iterator it, difference_type n) { return it += n; }
    friend const_iterator operator+(difference_type n, const_iterator it) { return it += n; }
    friend const_iterator operator-(const_iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
      return static_cast<difference_type>(a._index) - static_cast<difference_type>(b._index);
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a._index == b._index; }
    friend auto operator<=>(const const_iterator& a, const const_iterator& b) {
      return a._index <=> b._index;
    }

   private:
    const chunked_cow_vector* _owner = nullptr;
    size_t _index = 0;
  };
  using iterator = const_iterator;

  chunked_cow_vector() = default;
  chunked_cow_vector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  chunked_cow_vector(const std::vector<T>& values) { assign(values.begin(), values.end()); }  // NOLINT

  size_t size() const { return _size; }
  bool empty() const { return _size == 0; }
  const T& operator[](size_t i) const { return (*(*_chunks)[i / chunk_size])[i % chunk_size]; }
  const T& at(size_t i) const {
    if (i >= _size) throw std::out_of_range("chunked_cow_vector::at");
    return (*this)[i];
  }
  const T& front() const { return (*this)[0]; }
  const T& back() const { return (*this)[_size - 1]; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, _size}; }

  // The element, made this copy's own first.
  T& operator[](size_t i) { return own_chunk(i / chunk_size)[i % chunk_size]; }

  void push_back(T value) { emplace_back(std::move(value)); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    const size_t c = _size / chunk_size;
    if (!_chunks) _chunks = std::make_shared<chunk_table>();
    own_table();
    if (c == _chunks->size()) {
      _chunks->push_back(std::make_shared<chunk>());
      _chunks->back()->reserve(chunk_size);
    }
    T& added = own_chunk(c).emplace_back(std::forward<Args>(args)...);
    ++_size;
    return added;
  }
  void resize(size_t n) {
    while (_size > n) pop_back();
    while (_size < n) emplace_back();
  }
  void pop_back() {
    const size_t c = (_size - 1) / chunk_size;
    own_chunk(c).pop_back();
    if ((*_chunks)[c]->empty()) _chunks->pop_back();
    --_size;
  }
  void clear() {
    _chunks.reset();
    _size = 0;
  }
  template <typename It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) emplace_back(*first);
  }
  // An ordinary vector with the same elements (a copy).
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

  // True when both share all their elements (a copy not changed since): an O(1) "unchanged" test.
  bool shares_with(const chunked_cow_vector& other) const {
    return _chunks == other._chunks && _size == other._size;
  }

  friend bool operator==(const chunked_cow_vector& a, const chunked_cow_vector& b) {
    if (a._size != b._size) return false;
    if (a._size == 0 || a._chunks == b._chunks) return true;
    for (size_t c = 0; c < a._chunks->size(); ++c) {
      if ((*a._chunks)[c] != (*b._chunks)[c] && *(*a._chunks)[c] != *(*b._chunks)[c]) return false;
    }
    return true;
  }

 private:
  // The chunk table, made this copy's own (the chunks stay shared).
  void own_table() {
    if (_chunks.use_count() > 1) _chunks = std::make_shared<chunk_table>(*_chunks);
  }
  chunk& own_chunk(size_t c) {
    own_table();
    auto& slot = (*_chunks)[c];
    if (slot.use_count() > 1) {
      auto copy = std::make_shared<chunk>();
      copy->reserve(chunk_size);
      copy->assign(slot->begin(), slot->end());
      slot = std::move(copy);
    }
    return *slot;
  }

  std::shared_ptr<chunk_table> _chunks;
  size_t _size = 0;
};

}  // namespace mala
