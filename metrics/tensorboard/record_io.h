// TFRecord framing, as TensorFlow and TensorBoard write events files: each
// record is
//   uint64 length (little endian)
//   uint32 masked CRC32C of those 8 bytes
//   `length` bytes of data
//   uint32 masked CRC32C of the data
// where mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Internal to
// hy_metrics_tensorboard.
//
// Thread-safety: pure functions.

#ifndef HY_METRICS_TENSORBOARD_RECORD_IO_H_
#define HY_METRICS_TENSORBOARD_RECORD_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hy::metrics::tensorboard {

inline constexpr size_t kRecordHeaderBytes = 12;  // Length + its CRC.
inline constexpr size_t kRecordFooterBytes = 4;   // The data's CRC.

// CRC32C (Castagnoli) of `data`, masked as TFRecord stores it.
uint32_t MaskedCrc32c(std::string_view data);

// `data` framed as one record.
std::string FrameRecord(std::string_view data);

// Where the next record in `bytes` starts at `offset`.
enum class RecordParse {
  kOk,         // *data is the record; *next the offset after it.
  kEnd,        // offset == bytes.size().
  kTruncated,  // Fewer bytes left than the record needs.
  kBadLengthCrc,
  kBadDataCrc,
};
RecordParse ParseRecord(std::string_view bytes, size_t offset,
                        std::string_view* data, size_t* next);

}  // namespace hy::metrics::tensorboard

#endif  // HY_METRICS_TENSORBOARD_RECORD_IO_H_
