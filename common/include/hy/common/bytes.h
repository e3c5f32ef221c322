// ConstBytes / MutableBytes: non-owning views of a contiguous byte range, in
// the manner of leveldb::Slice but for binary tensor data.
//
// The viewer does not own the memory: the caller keeps the underlying buffer
// alive and unmoved while the view is used. Views are cheap to copy.
//
// Thread-safety: a view is a value; concurrent reads through views are safe,
// concurrent writes through MutableBytes to overlapping ranges are not.

#ifndef HY_COMMON_BYTES_H_
#define HY_COMMON_BYTES_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace hy {

class ConstBytes {
 public:
  constexpr ConstBytes() = default;
  constexpr ConstBytes(const uint8_t* data, size_t size)
      : data_(data), size_(size) {}
  ConstBytes(const void* data, size_t size)
      : data_(static_cast<const uint8_t*>(data)), size_(size) {}
  ConstBytes(const std::string& s)  // NOLINT: implicit by design
      : ConstBytes(s.data(), s.size()) {}
  ConstBytes(std::string_view s)  // NOLINT: implicit by design
      : ConstBytes(s.data(), s.size()) {}
  ConstBytes(const std::vector<uint8_t>& v)  // NOLINT: implicit by design
      : ConstBytes(v.data(), v.size()) {}

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint8_t operator[](size_t i) const {
    assert(i < size_);
    return data_[i];
  }

  // REQUIRES: offset + n <= size().
  ConstBytes subspan(size_t offset, size_t n) const {
    assert(offset <= size_ && n <= size_ - offset);
    return ConstBytes(data_ + offset, n);
  }
  // REQUIRES: offset <= size().
  ConstBytes subspan(size_t offset) const {
    assert(offset <= size_);
    return ConstBytes(data_ + offset, size_ - offset);
  }

  std::string_view AsStringView() const {
    return std::string_view(reinterpret_cast<const char*>(data_), size_);
  }

  // Byte-wise equality of contents.
  bool ContentEquals(ConstBytes other) const {
    return size_ == other.size_ &&
           (size_ == 0 || std::memcmp(data_, other.data_, size_) == 0);
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class MutableBytes {
 public:
  constexpr MutableBytes() = default;
  constexpr MutableBytes(uint8_t* data, size_t size)
      : data_(data), size_(size) {}
  MutableBytes(void* data, size_t size)
      : data_(static_cast<uint8_t*>(data)), size_(size) {}
  MutableBytes(std::vector<uint8_t>& v)  // NOLINT: implicit by design
      : MutableBytes(v.data(), v.size()) {}
  MutableBytes(std::string& s)  // NOLINT: implicit by design
      : MutableBytes(s.data(), s.size()) {}

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint8_t& operator[](size_t i) const {
    assert(i < size_);
    return data_[i];
  }

  // REQUIRES: offset + n <= size().
  MutableBytes subspan(size_t offset, size_t n) const {
    assert(offset <= size_ && n <= size_ - offset);
    return MutableBytes(data_ + offset, n);
  }

  operator ConstBytes() const {  // NOLINT: implicit by design
    return ConstBytes(data_, size_);
  }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hy

#endif  // HY_COMMON_BYTES_H_
