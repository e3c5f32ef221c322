// Reader and writer for the safetensors file format
// (https://huggingface.co/docs/safetensors), the interchange format of the
// Hugging Face ecosystem: hy imports and exports checkpoints through it.
//
// Layout (all integers little-endian):
//   8 bytes   u64 N, the header length
//   N bytes   UTF-8 JSON object: tensor name -> {"dtype": "F32",
//             "shape": [2, 3], "data_offsets": [begin, end]}, plus an
//             optional "__metadata__" -> {string: string}
//   the rest  the data buffer; data_offsets are relative to its start
//
// The reader validates a file the way the reference implementation does: N at
// most kSafetensorsMaxHeaderSize, the header a JSON object with no duplicate
// keys, every dtype one hy knows (hy::DType), shapes of non-negative integers,
// end - begin == element count * element size (overflow-checked), and the
// tensors' byte ranges neither overlapping nor leaving holes and together
// covering the data buffer exactly up to the end of the file. Anything else is
// DataLoss, with the offending tensor named. hy also rejects an empty tensor
// name (TensorMeta cannot hold one).
//
// The writer orders tensors like the reference implementation: by element
// size, largest first (exactly: by the reference's dtype order, descending),
// then by name. With the header padded by spaces so the data buffer starts at
// a multiple of 8, every tensor's data is then aligned to its element size.
// The header lists "__metadata__" first (keys sorted), then the tensors in
// data order, in compact JSON: the reference writes the same bytes for the
// same tensors (its metadata key order is unspecified).

#ifndef HY_STATESTORE_SAFETENSORS_H_
#define HY_STATESTORE_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/common/tensor_meta.h"

namespace hy::statestore {

// The reference implementation refuses headers larger than this; so do we,
// reading and writing.
inline constexpr uint64_t kSafetensorsMaxHeaderSize = 100'000'000;
// The key of the file-level string map in the header.
inline constexpr std::string_view kSafetensorsMetadataKey = "__metadata__";

// One tensor of a file: what it is and where its bytes lie.
struct SafetensorsTensor {
  TensorMeta meta;
  uint64_t data_begin = 0;  // Offsets within the data buffer, [begin, end).
  uint64_t data_end = 0;

  uint64_t byte_size() const { return data_end - data_begin; }
};

// The parsed and validated header of a file.
struct SafetensorsLayout {
  uint64_t header_size = 0;                // N.
  std::vector<SafetensorsTensor> tensors;  // In data (offset) order.
  std::map<std::string, std::string> metadata;

  // File offset of the data buffer: 8 + N.
  uint64_t data_offset() const { return 8 + header_size; }
};

// Parses and validates a whole safetensors file held in memory (`file` is
// every byte of it: the reader checks that the tensors end where the file
// does). Returns DataLoss for anything malformed or truncated, naming the
// problem and the tensor.
Result<SafetensorsLayout> ParseSafetensors(ConstBytes file);

// The file name of the index of a model saved in several safetensors files
// (Hugging Face's sharded checkpoints), and its parse: the "weight_map"
// object, tensor name -> the file in the same directory that holds it.
inline constexpr std::string_view kSafetensorsIndexName =
    "model.safetensors.index.json";
// Returns DataLoss, naming `where`, unless `json` is an object whose
// "weight_map" maps non-empty names to plain file names (no directory
// part, not "." or "..": an index cannot point outside its directory).
Result<std::map<std::string, std::string>> ParseSafetensorsIndex(
    std::string_view json, const std::string& where);

// A safetensors file opened for reading: the header parsed and validated, the
// file mapped read-only so tensor data is served without copies.
//
// Owns the mapping; views returned by TensorData stay valid until the reader
// is destroyed. The file must not be truncated while it is open (reading a
// page beyond the new end would raise SIGBUS).
// Thread-safety: immutable after Open; every method is safe to call
// concurrently.
class SafetensorsReader {
 public:
  // Opens, maps and validates `path`. Returns NotFound if it does not exist,
  // IOError if it cannot be opened, is not a regular file or cannot be
  // mapped, and DataLoss as ParseSafetensors for a malformed file.
  static Result<std::unique_ptr<SafetensorsReader>> Open(
      const std::string& path);

  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;
  ~SafetensorsReader();

  // Every tensor, in data (offset) order.
  const std::vector<SafetensorsTensor>& tensors() const {
    return layout_.tensors;
  }
  // The "__metadata__" map; empty when the file has none.
  const std::map<std::string, std::string>& metadata() const {
    return layout_.metadata;
  }
  const SafetensorsLayout& layout() const { return layout_; }
  uint64_t file_size() const { return size_; }

  // Returns the tensor called `name`, or nullptr if there is none.
  const SafetensorsTensor* Find(std::string_view name) const;

  // Returns a view of the bytes of the tensor called `name` (little-endian
  // elements, row-major), or NotFound if the file has no such tensor.
  Result<ConstBytes> TensorData(std::string_view name) const;
  // The bytes of tensors()[index].
  // REQUIRES: index < tensors().size().
  ConstBytes TensorDataAt(size_t index) const;

 private:
  SafetensorsReader(const uint8_t* base, uint64_t size,
                    SafetensorsLayout layout);

  const uint8_t* base_;  // The mapping; nullptr for an empty file.
  uint64_t size_;
  SafetensorsLayout layout_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> tensors_ index
};

// Writes a safetensors file in one pass without holding its data: the
// tensors are declared up front, their bytes are then appended in data order
// (tensors(), see the file comment), in as many pieces as the caller likes,
// and Finish makes the file appear.
//
// The bytes go to a temporary file beside `path`; Finish fsyncs it, renames
// it over `path` and fsyncs the directory, so a crash never leaves a partial
// file under the final name. Any error, and destroying the writer before a
// successful Finish, removes the temporary file; after an error every call
// returns FailedPrecondition.
// Thread-safety: not thread-safe; use from one thread at a time.
class SafetensorsWriter {
 public:
  // Validates the tensors and metadata, creates the temporary file and
  // writes the header. Returns InvalidArgument for an invalid TensorMeta, a
  // duplicate name, a tensor named "__metadata__", a string that is not valid
  // UTF-8, or a header over kSafetensorsMaxHeaderSize; NotFound or IOError if
  // the temporary file cannot be created or written.
  static Result<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, std::vector<TensorMeta> tensors,
      std::map<std::string, std::string> metadata = {});

  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter();

  // The tensors in data order: the order Append expects their bytes in.
  const std::vector<SafetensorsTensor>& tensors() const {
    return layout_.tensors;
  }
  const SafetensorsLayout& layout() const { return layout_; }

  // Appends the next `bytes` of tensor `name`. A tensor's bytes may come in
  // several pieces; zero-size tensors need no call (an empty Append for one
  // is accepted). Returns InvalidArgument, and abandons the file, if `name`
  // is not the tensor whose bytes are due (tensors() order) or `bytes` runs
  // past its end; IOError if writing fails.
  Status Append(std::string_view name, ConstBytes bytes);

  // Flushes, fsyncs and renames the file into place, then fsyncs the
  // directory. Returns InvalidArgument, and abandons the file, if some
  // tensor's bytes are still missing; IOError if a write, fsync or the rename
  // fails (the file is complete under `path` when only the directory fsync
  // fails).
  Status Finish();

 private:
  SafetensorsWriter(std::string path, std::string temp_path, int fd,
                    SafetensorsLayout layout);

  Status Fail(Status status);  // Abandons the file; returns status.
  Status CheckUsable() const;
  Status Write(ConstBytes bytes);  // Through buffer_.
  Status Flush();

  const std::string path_;
  const std::string temp_path_;
  int fd_;  // -1 once closed.
  SafetensorsLayout layout_;
  size_t next_ = 0;           // Index of the tensor whose bytes are due.
  uint64_t next_filled_ = 0;  // Bytes of tensors()[next_] written so far.
  std::vector<uint8_t> buffer_;
  Status error_;  // The first error; the writer is unusable once set.
  bool finished_ = false;
};

// Writes `tensors` (meta and bytes each; any order) and `metadata` to `path`
// through a SafetensorsWriter. Returns InvalidArgument if a tensor's bytes
// are not exactly its ByteSize(), else the writer's errors.
Status WriteSafetensors(
    const std::string& path,
    const std::vector<std::pair<TensorMeta, ConstBytes>>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace hy::statestore

#endif  // HY_STATESTORE_SAFETENSORS_H_
