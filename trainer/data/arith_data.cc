#include "hy/trainer/data/arith_data.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "counter_rng.h"

namespace hy::trainer {
namespace {

constexpr uint64_t kArithDomain = 0x4152'4954'4844'4154ULL;  // "ARITHDAT"

bool IsArithOp(char op) { return op == '+' || op == '-' || op == '*'; }

uint64_t PowerOf10(int n) {
  uint64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

// A number of `digits` digits without a leading zero (0..9 for one digit).
int64_t Operand(CounterStream* rng, int digits) {
  const uint64_t lo = digits == 1 ? 0 : PowerOf10(digits - 1);
  const uint64_t hi = PowerOf10(digits);
  return static_cast<int64_t>(lo + rng->Below(hi - lo));
}

int64_t Apply(char op, int64_t a, int64_t b) {
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    default:
      return a * b;
  }
}

}  // namespace

Status ValidateArithConfig(const ArithConfig& c) {
  if (c.ops.empty()) return Status::InvalidArgument("arith: no operation");
  for (char op : c.ops) {
    if (!IsArithOp(op)) {
      return Status::InvalidArgument(std::string("arith: operation '") + op +
                                     "' is not +, - or *");
    }
  }
  if (c.min_digits < 1 || c.min_digits > c.max_digits ||
      c.max_digits > kMaxArithDigits) {
    return Status::InvalidArgument(
        "arith: need 1 <= min_digits <= max_digits <= " +
        std::to_string(kMaxArithDigits) + ", got " +
        std::to_string(c.min_digits) + ".." + std::to_string(c.max_digits));
  }
  if (c.count == 0) return Status::InvalidArgument("arith: count is 0");
  return Status::OK();
}

Result<std::string> ParseArithOps(std::string_view text) {
  std::string ops;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma - start);
    if (item.size() != 1 || !IsArithOp(item[0])) {
      return Status::InvalidArgument("arith: operation \"" + std::string(item) +
                                     "\" is not +, - or *");
    }
    ops += item[0];
    if (comma == std::string_view::npos) return ops;
    start = comma + 1;
  }
}

ArithProblem MakeArithProblem(const ArithConfig& config, uint64_t index) {
  CounterStream rng(MixKey(kArithDomain, config.seed, index));
  const char op = config.ops[rng.Below(config.ops.size())];
  const uint64_t span =
      static_cast<uint64_t>(config.max_digits - config.min_digits) + 1;
  const int64_t a =
      Operand(&rng, config.min_digits + static_cast<int>(rng.Below(span)));
  const int64_t b =
      Operand(&rng, config.min_digits + static_cast<int>(rng.Below(span)));
  return {std::to_string(a) + op + std::to_string(b) + "=",
          std::to_string(Apply(op, a, b))};
}

std::string ArithJsonLine(const ArithProblem& problem, bool chat) {
  nlohmann::ordered_json record;
  if (chat) {
    const nlohmann::ordered_json message = {{"role", "user"},
                                            {"content", problem.question}};
    record["prompt"] = nlohmann::ordered_json::array({message});
  } else {
    record["prompt"] = problem.question;
  }
  record["answer"] = problem.answer;
  return record.dump();
}

Status WriteArithJsonl(const ArithConfig& config, const std::string& path) {
  HY_RETURN_IF_ERROR(ValidateArithConfig(config));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (uint64_t i = 0; i < config.count && out; ++i) {
    out << ArithJsonLine(MakeArithProblem(config, i), config.chat) << '\n';
  }
  out.close();
  if (!out) return Status::IOError(path + ": cannot write");
  return Status::OK();
}

std::string ArithSftTarget(const PromptRecord& record) { return record.answer; }

}  // namespace hy::trainer
