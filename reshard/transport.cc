// Transport's default AllGatherInto (see hy/reshard/transport.h).

#include <cstring>

#include "hy/reshard/transport.h"

namespace hy::reshard {

Status Transport::AllGatherInto(ConstBytes in,
                                const std::vector<MutableBytes>& out) {
  if (static_cast<int>(out.size()) != world_size()) {
    return Status::InvalidArgument(
        "AllGatherInto: " + std::to_string(out.size()) +
        " outputs for world size " + std::to_string(world_size()));
  }
  std::vector<std::vector<uint8_t>> parts;
  HY_RETURN_IF_ERROR(AllGatherV(in, &parts));
  for (int p = 0; p < world_size(); ++p) {
    if (p == rank()) continue;
    if (parts[p].size() != out[p].size()) {
      return Status::Internal("AllGatherInto: rank " + std::to_string(p) +
                              " sent " + std::to_string(parts[p].size()) +
                              " bytes, expected " +
                              std::to_string(out[p].size()));
    }
    if (!parts[p].empty()) {
      std::memcpy(out[p].data(), parts[p].data(), parts[p].size());
    }
  }
  return Status::OK();
}

}  // namespace hy::reshard
