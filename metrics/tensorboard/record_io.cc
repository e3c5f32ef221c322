#include "record_io.h"

#include <boost/crc.hpp>

namespace hy::metrics::tensorboard {
namespace {

// CRC-32C: polynomial 0x1EDC6F41, reflected, initial and final XOR all ones.
using Crc32c =
    boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

void PutLittleEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) {
    out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

uint64_t GetLittleEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

}  // namespace

uint32_t MaskedCrc32c(std::string_view data) {
  Crc32c crc;
  crc.process_bytes(data.data(), data.size());
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string FrameRecord(std::string_view data) {
  std::string out;
  out.reserve(kRecordHeaderBytes + data.size() + kRecordFooterBytes);
  PutLittleEndian(data.size(), 8, &out);
  PutLittleEndian(MaskedCrc32c(out), 4, &out);
  out.append(data);
  PutLittleEndian(MaskedCrc32c(data), 4, &out);
  return out;
}

RecordParse ParseRecord(std::string_view bytes, size_t offset,
                        std::string_view* data, size_t* next) {
  if (offset == bytes.size()) return RecordParse::kEnd;
  const size_t left = bytes.size() - offset;
  if (left < kRecordHeaderBytes) return RecordParse::kTruncated;
  const char* p = bytes.data() + offset;
  if (GetLittleEndian(p + 8, 4) != MaskedCrc32c(std::string_view(p, 8))) {
    return RecordParse::kBadLengthCrc;
  }
  const uint64_t length = GetLittleEndian(p, 8);
  if (length > left - kRecordHeaderBytes ||
      left - kRecordHeaderBytes - length < kRecordFooterBytes) {
    return RecordParse::kTruncated;
  }
  *data = std::string_view(p + kRecordHeaderBytes, length);
  if (GetLittleEndian(p + kRecordHeaderBytes + length, 4) !=
      MaskedCrc32c(*data)) {
    return RecordParse::kBadDataCrc;
  }
  *next = offset + kRecordHeaderBytes + length + kRecordFooterBytes;
  return RecordParse::kOk;
}

}  // namespace hy::metrics::tensorboard
