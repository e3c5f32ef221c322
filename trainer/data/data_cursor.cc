#include "hy/trainer/data/data_cursor.h"

#include <cassert>
#include <nlohmann/json.hpp>
#include <numeric>
#include <utility>

#include "counter_rng.h"

namespace hy::trainer {
namespace {

constexpr uint64_t kOrderDomain = 0x4441'5441'4F52'4452ULL;  // "DATAORDR"
constexpr int kPositionVersion = 1;

// Names what differs between `saved` and `now`; empty when nothing does.
std::string Differences(const DataPosition& saved, const DataPosition& now) {
  std::string out;
  auto add = [&out](const std::string& what) {
    out += (out.empty() ? "" : "; ") + what;
  };
  if (saved.fingerprint != now.fingerprint) {
    add("dataset fingerprint " + saved.fingerprint.ToHex() + " -> " +
        now.fingerprint.ToHex());
  }
  if (saved.dataset_size != now.dataset_size) {
    add("dataset size " + std::to_string(saved.dataset_size) + " -> " +
        std::to_string(now.dataset_size));
  }
  if (saved.seed != now.seed) {
    add("seed " + std::to_string(saved.seed) + " -> " +
        std::to_string(now.seed));
  }
  if (saved.shuffle != now.shuffle) {
    add(std::string("shuffle ") + (saved.shuffle ? "on" : "off") + " -> " +
        (now.shuffle ? "on" : "off"));
  }
  return out;
}

}  // namespace

std::vector<uint64_t> EpochOrder(uint64_t size, uint64_t seed, uint64_t epoch,
                                 bool shuffle) {
  std::vector<uint64_t> order(size);
  std::iota(order.begin(), order.end(), uint64_t{0});
  if (!shuffle) return order;
  CounterStream rng(MixKey(kOrderDomain, seed, epoch));
  for (uint64_t i = size; i > 1; --i) {
    std::swap(order[i - 1], order[rng.Below(i)]);
  }
  return order;
}

std::string EncodeDataPosition(const DataPosition& p) {
  nlohmann::json j = {{"version", kPositionVersion},
                      {"consumed", p.consumed},
                      {"seed", p.seed},
                      {"shuffle", p.shuffle},
                      {"dataset_size", p.dataset_size},
                      {"fingerprint", p.fingerprint.ToHex()}};
  return j.dump();
}

Result<DataPosition> DecodeDataPosition(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto field = [&j](const char* name) -> const nlohmann::json* {
    if (!j.is_object()) return nullptr;
    auto it = j.find(name);
    return it == j.end() ? nullptr : &*it;
  };
  const nlohmann::json* version = field("version");
  if (version == nullptr || !version->is_number_unsigned()) {
    return Status::DataLoss("data position: not a JSON object with a version");
  }
  if (version->get<uint64_t>() != kPositionVersion) {
    return Status::InvalidArgument("data position: version " + version->dump() +
                                   " is not 1");
  }
  const nlohmann::json* consumed = field("consumed");
  const nlohmann::json* seed = field("seed");
  const nlohmann::json* shuffle = field("shuffle");
  const nlohmann::json* size = field("dataset_size");
  const nlohmann::json* fp = field("fingerprint");
  if (!consumed || !consumed->is_number_unsigned() || !seed ||
      !seed->is_number_unsigned() || !shuffle || !shuffle->is_boolean() ||
      !size || !size->is_number_unsigned() || !fp || !fp->is_string()) {
    return Status::DataLoss("data position: missing or mistyped field in " +
                            std::string(text));
  }
  auto fingerprint = Hash128::FromHex(fp->get<std::string>());
  if (!fingerprint.ok()) {
    return Status::DataLoss("data position: bad fingerprint: " +
                            std::string(fingerprint.status().message()));
  }
  return DataPosition{consumed->get<uint64_t>(), seed->get<uint64_t>(),
                      shuffle->get<bool>(), size->get<uint64_t>(),
                      *fingerprint};
}

DataCursor::DataCursor(uint64_t dataset_size, const Hash128& fingerprint,
                       uint64_t seed, bool shuffle) {
  assert(dataset_size > 0);
  position_.seed = seed;
  position_.shuffle = shuffle;
  position_.dataset_size = dataset_size;
  position_.fingerprint = fingerprint;
}

uint64_t DataCursor::RecordAt(uint64_t position) {
  const uint64_t size = position_.dataset_size;
  const uint64_t epoch = position / size;
  if (epoch != cached_epoch_) {
    order_ = EpochOrder(size, position_.seed, epoch, position_.shuffle);
    cached_epoch_ = epoch;
  }
  return order_[position % size];
}

std::vector<uint64_t> DataCursor::PeekBatch(uint64_t batch_size) {
  std::vector<uint64_t> records(batch_size);
  for (uint64_t j = 0; j < batch_size; ++j) {
    records[j] = RecordAt(position_.consumed + j);
  }
  return records;
}

Status DataCursor::Restore(const DataPosition& saved,
                           bool allow_changed_dataset) {
  const std::string diff = Differences(saved, position_);
  if (!diff.empty() && !allow_changed_dataset) {
    return Status::FailedPrecondition(
        "cannot resume the data order: the checkpoint's differs (" + diff +
        "); restore the original data and seed, or allow a changed "
        "dataset to continue at prompt " +
        std::to_string(saved.consumed) + " of the new order");
  }
  position_.consumed = saved.consumed;
  return Status::OK();
}

}  // namespace hy::trainer
