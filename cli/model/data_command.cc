// hyctl data gen-arith OUT.jsonl: writes `count` arithmetic problems
// ({"prompt": "37+45=", "answer": "82"}, or the prompt as one user chat
// message with --chat) for data.train_files and the exact_match reward.

#include "model/data_command.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "cli_util.h"
#include "hy/trainer/data/arith_data.h"

namespace hy::cli {
namespace {

struct GenArithArgs {
  std::string out;
  std::string ops = "+,-";
  trainer::ArithConfig config;
};

// Bad options (operations, digit range, count) exit with kExitUsage.
int GenArith(GenArithArgs args) {
  auto ops = trainer::ParseArithOps(args.ops);
  Status s = ops.ok() ? Status::OK() : ops.status();
  if (s.ok()) {
    args.config.ops = *ops;
    s = trainer::ValidateArithConfig(args.config);
  }
  if (!s.ok()) {
    Report("data gen-arith", s);
    return kExitUsage;
  }
  s = trainer::WriteArithJsonl(args.config, args.out);
  if (!s.ok()) return Report("data gen-arith", s);
  std::cout << "wrote " << args.config.count << " arithmetic prompts to "
            << args.out << "\n";
  return kExitOk;
}

}  // namespace

void AddDataCommand(CLI::App* app, int* exit_code) {
  CLI::App* data = app->add_subcommand("data", "Prompt datasets for training");
  data->require_subcommand(1);

  auto args = std::make_shared<GenArithArgs>();
  trainer::ArithConfig& c = args->config;
  CLI::App* gen =
      data->add_subcommand("gen-arith",
                           "Write verifiable arithmetic prompts as JSONL "
                           "({\"prompt\": \"37+45=\", \"answer\": \"82\"})");
  gen->add_option("OUT", args->out, "Output .jsonl file")->required();
  gen->add_option("--count", c.count, "Number of problems")
      ->capture_default_str();
  gen->add_option("--seed", c.seed, "Seed of the problem stream")
      ->capture_default_str();
  gen->add_option("--ops", args->ops, "Operations, from +,-,* (e.g. +,-)")
      ->capture_default_str();
  gen->add_option("--min-digits", c.min_digits, "Fewest digits per operand")
      ->capture_default_str();
  gen->add_option("--max-digits", c.max_digits, "Most digits per operand")
      ->capture_default_str();
  gen->add_flag("--chat", c.chat, "Write each prompt as one user chat message");
  gen->callback([args, exit_code] { *exit_code = GenArith(*args); });
}

}  // namespace hy::cli
