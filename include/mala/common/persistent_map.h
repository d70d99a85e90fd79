// An ordered map whose copies share their entries until one of them changes (copy-on-write), as a balanced
// (AVL) tree of shared nodes: copying it costs one reference count, and changing, adding or removing one
// entry in a copy copies only the O(log n) nodes on the way to it. Metadata images hold their topics and
// configs in it, so that a new image (every committed metadata record batch) costs what it changes, not the
// number of topics, as Kafka's persistent image maps (pcollections) do.
//
// Reads (find, at, contains, size, const iteration in key order) never copy. Writes go through operator[],
// insert_or_assign, emplace, try_emplace, erase and clear, which first make the nodes they touch this
// object's own. Iteration is const only, so that a loop cannot copy every node by accident; a write
// invalidates the iterators of this object (never those of a copy). Not synchronized: a copy held by another
// thread is never modified through this one, which is all an immutable image needs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace mala {

template <typename K, typename V, typename Compare = std::less<K>>
class persistent_map {
 public:
  using key_type = K;
  using mapped_type = V;
  using value_type = std::pair<const K, V>;
  using size_type = size_t;

 private:
  struct node;
  using node_ptr = std::shared_ptr<node>;
  struct node {
    value_type entry;
    node_ptr left;
    node_ptr right;
    int height = 1;
    template <typename... Args>
    explicit node(Args&&... args) : entry(std::forward<Args>(args)...) {}
    node(const node&) = default;
  };

 public:
  // In key order. Holds the nodes still to visit (the current one and the ancestors it is left of).
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = persistent_map::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;

    const_iterator() {}  // user-provided: `{}` must not zero the path (end() is made in every loop test)
    reference operator*() const { return _path.back()->entry; }
    pointer operator->() const { return &_path.back()->entry; }
    const_iterator& operator++() {
      const node* n = _path.back();
      _path.pop_back();
      descend_left(n->right.get());
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++*this;
      return before;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      if (a._path.empty() || b._path.empty()) return a._path.empty() == b._path.empty();
      return a._path.back() == b._path.back();
    }

   private:
    friend class persistent_map;
    void descend_left(const node* n) {
      for (; n; n = n->left.get()) _path.push_back(n);
    }
    // A fixed stack, so that find() and begin() allocate nothing: an AVL tree 64 deep would hold more than
    // 10^13 entries.
    struct path_stack {
      path_stack() {}  // the nodes past _size are never read
      path_stack(const path_stack& other) : _size(other._size) {
        std::copy(other._nodes, other._nodes + _size, _nodes);
      }
      path_stack& operator=(const path_stack& other) {
        _size = other._size;
        std::copy(other._nodes, other._nodes + _size, _nodes);
        return *this;
      }
      bool empty() const { return _size == 0; }
      const node* back() const { return _nodes[_size - 1]; }
      void pop_back() { --_size; }
      void push_back(const node* n) {
        if (_size == max_depth) throw std::length_error("persistent_map: tree deeper than 64");
        _nodes[_size++] = n;
      }

     private:
      static constexpr size_t max_depth = 64;
      const node* _nodes[max_depth];
      size_t _size = 0;
    };
    path_stack _path;
  };
  using iterator = const_iterator;

  persistent_map() = default;
  persistent_map(std::initializer_list<value_type> entries) {
    for (const auto& e : entries) insert_or_assign(e.first, e.second);
  }

  size_t size() const { return _size; }
  bool empty() const { return _size == 0; }

  const_iterator begin() const {
    const_iterator it;
    it.descend_left(_root.get());
    return it;
  }
  const_iterator end() const { return {}; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }

  const_iterator find(const K& key) const {
    const_iterator it;
    for (const node* n = _root.get(); n;) {
      if (_less(key, n->entry.first)) {
        it._path.push_back(n);
        n = n->left.get();
      } else if (_less(n->entry.first, key)) {
        n = n->right.get();
      } else {
        it._path.push_back(n);
        return it;
      }
    }
    return {};
  }
  // The value of `key`, or nullptr.
  const V* get(const K& key) const {
    const node* n = find_node(key);
    return n ? &n->entry.second : nullptr;
  }
  bool contains(const K& key) const { return find_node(key) != nullptr; }
  size_t count(const K& key) const { return contains(key) ? 1 : 0; }
  const V& at(const K& key) const {
    const node* n = find_node(key);
    if (!n) throw std::out_of_range("persistent_map::at");
    return n->entry.second;
  }

  // The value of `key`, made this object's own (inserted default-constructed when absent).
  V& operator[](const K& key) {
    bool inserted = false;
    node* n = insert_at(_root, key, inserted, [&key] { return std::make_shared<node>(key, V{}); });
    if (inserted) ++_size;
    return n->entry.second;
  }
  template <typename M>
  std::pair<const_iterator, bool> insert_or_assign(const K& key, M&& value) {
    bool inserted = false;
    node* n = insert_at(_root, key, inserted,
                        [&] { return std::make_shared<node>(key, V(std::forward<M>(value))); });
    if (inserted) {
      ++_size;
    } else {
      n->entry.second = std::forward<M>(value);
    }
    return {find(key), inserted};
  }
  template <typename... Args>
  std::pair<const_iterator, bool> try_emplace(const K& key, Args&&... args) {
    if (contains(key)) return {find(key), false};
    bool inserted = false;
    insert_at(_root, key, inserted, [&] {
      return std::make_shared<node>(std::piecewise_construct, std::forward_as_tuple(key),
                                    std::forward_as_tuple(std::forward<Args>(args)...));
    });
    ++_size;
    return {find(key), true};
  }
  template <typename KK, typename VV>
  std::pair<const_iterator, bool> emplace(KK&& key, VV&& value) {
    return try_emplace(K(std::forward<KK>(key)), std::forward<VV>(value));
  }

  size_t erase(const K& key) {
    if (!contains(key)) return 0;
    erase_at(_root, key);
    --_size;
    return 1;
  }
  void clear() {
    _root.reset();
    _size = 0;
  }

  // The tree's depth (an AVL tree of n entries is at most 1.44 log2(n + 2) deep).
  int tree_height() const { return height(_root); }

  // Whether the two hold the very same nodes (a copy nothing changed since): equal without a look inside.
  bool shares_with(const persistent_map& other) const { return _root == other._root; }

  // Calls visit(key, before_value, after_value) in key order for every key whose entry `after` does not share
  // with `before`: present in one only (the other pointer null), or held in a node of its own (the values may
  // still be equal). Subtrees the two share are skipped whole, so the cost follows the changes since `before`
  // was copied (O(changes log n)), where the trees kept their shape; below a rotation the two subtrees are
  // merged in key order.
  template <typename Visit>
  static void for_each_difference(const persistent_map& before, const persistent_map& after, Visit&& visit) {
    const Compare less{};
    diff_nodes(before._root.get(), after._root.get(), less, visit);
  }

  friend bool operator==(const persistent_map& a, const persistent_map& b) {
    if (a._size != b._size) return false;
    if (a._root == b._root) return true;
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  const node* find_node(const K& key) const {
    const node* n = _root.get();
    while (n) {
      if (_less(key, n->entry.first)) {
        n = n->left.get();
      } else if (_less(n->entry.first, key)) {
        n = n->right.get();
      } else {
        return n;
      }
    }
    return nullptr;
  }

  template <typename Visit>
  static void diff_nodes(const node* a, const node* b, const Compare& less, Visit& visit) {
    if (a == b) return;
    if (a && b && !less(a->entry.first, b->entry.first) && !less(b->entry.first, a->entry.first)) {
      // The same key at the same place: the left subtrees hold the same range of keys, and so do the right.
      diff_nodes(a->left.get(), b->left.get(), less, visit);
      visit(b->entry.first, &a->entry.second, &b->entry.second);
      diff_nodes(a->right.get(), b->right.get(), less, visit);
      return;
    }
    // Different shapes (a rotation, an insertion or removal here): both subtrees in key order, side by side.
    const_iterator x, y;
    x.descend_left(a);
    y.descend_left(b);
    const const_iterator end;
    while (x != end || y != end) {
      if (y == end || (x != end && less(x->first, y->first))) {
        visit(x->first, &x->second, static_cast<const V*>(nullptr));
        ++x;
      } else if (x == end || less(y->first, x->first)) {
        visit(y->first, static_cast<const V*>(nullptr), &y->second);
        ++y;
      } else {
        if (&x->second != &y->second) visit(y->first, &x->second, &y->second);
        ++x;
        ++y;
      }
    }
  }

  static int height(const node_ptr& n) { return n ? n->height : 0; }
  static void update(node* n) { n->height = 1 + std::max(height(n->left), height(n->right)); }
  // Makes `p` this object's own: a node another map shares is copied (its children stay shared).
  static node* own(node_ptr& p) {
    if (p.use_count() > 1) p = std::make_shared<node>(static_cast<const node&>(*p));
    return p.get();
  }
  static void rotate_right(node_ptr& p) {
    own(p);
    node_ptr l = std::move(p->left);
    own(l);
    p->left = std::move(l->right);
    update(p.get());
    l->right = std::move(p);
    update(l.get());
    p = std::move(l);
  }
  static void rotate_left(node_ptr& p) {
    own(p);
    node_ptr r = std::move(p->right);
    own(r);
    p->right = std::move(r->left);
    update(p.get());
    r->left = std::move(p);
    update(r.get());
    p = std::move(r);
  }
  // `p` is this object's own.
  static void rebalance(node_ptr& p) {
    update(p.get());
    const int balance = height(p->left) - height(p->right);
    if (balance > 1) {
      if (height(p->left->left) < height(p->left->right)) rotate_left(p->left);
      rotate_right(p);
    } else if (balance < -1) {
      if (height(p->right->right) < height(p->right->left)) rotate_right(p->right);
      rotate_left(p);
    }
  }

  // The node of `key` under p, this object's own with every node above it, made by make() when absent.
  template <typename Make>
  node* insert_at(node_ptr& p, const K& key, bool& inserted, const Make& make) {
    if (!p) {
      p = make();
      inserted = true;
      return p.get();
    }
    node* n = own(p);
    node* found;
    if (_less(key, n->entry.first)) {
      found = insert_at(n->left, key, inserted, make);
    } else if (_less(n->entry.first, key)) {
      found = insert_at(n->right, key, inserted, make);
    } else {
      return n;
    }
    // Rotations move nodes, never copy the ones already owned: `found` stays valid.
    if (inserted) rebalance(p);
    return found;
  }

  // Removes the leftmost node under p (owned) into `out`.
  static void take_min(node_ptr& p, node_ptr& out) {
    node* n = own(p);
    if (!n->left) {
      out = std::move(p);
      p = std::move(out->right);
      return;
    }
    take_min(n->left, out);
    rebalance(p);
  }
  // `key` is present under p.
  void erase_at(node_ptr& p, const K& key) {
    node* n = own(p);
    if (_less(key, n->entry.first)) {
      erase_at(n->left, key);
    } else if (_less(n->entry.first, key)) {
      erase_at(n->right, key);
    } else if (!n->left || !n->right) {
      node_ptr child = n->left ? std::move(n->left) : std::move(n->right);
      p = std::move(child);
      return;
    } else {
      node_ptr successor;
      take_min(n->right, successor);
      successor->left = std::move(n->left);
      successor->right = std::move(n->right);
      p = std::move(successor);
    }
    rebalance(p);
  }

  node_ptr _root;
  size_t _size = 0;
  [[no_unique_address]] Compare _less;
};

}  // namespace mala
