// What hyctl train prints (cli/train/train_output.cc): the text and the -o json
// line of one iteration count it alike, and the end-of-run summary's two
// ends never overlap.

#include "train/train_output.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace hy::cli {
namespace {

TEST(TrainOutputTest, TextAndJsonCountIterationsFromOne) {
  trainer::IterationReport r;
  r.iteration = 0;  // The report's index: the first iteration run.
  r.checkpoint_step = 1;
  EXPECT_EQ(IterationText(r, 12).rfind("iter  1/12 ", 0), 0u)
      << IterationText(r, 12);
  EXPECT_EQ(nlohmann::json::parse(IterationJson(r))["iteration"], 1);
  r.iteration = 11;
  r.checkpoint_step = 12;
  EXPECT_EQ(IterationText(r, 12).rfind("iter 12/12 ", 0), 0u)
      << IterationText(r, 12);
  const nlohmann::json j = nlohmann::json::parse(IterationJson(r));
  EXPECT_EQ(j["iteration"], 12);
  EXPECT_EQ(j["checkpoint_step"], 12);  // Iteration N commits step N.
}

TEST(TrainOutputTest, SummaryAveragesHalvesOfAShortRun) {
  trainer::RunSummary s;
  s.first10_reward = 0.25;
  s.last10_reward = 0.5;
  s.iterations = 12;
  EXPECT_NE(SummaryText(s).find("mean of the first 6 iterations -> the "
                                "last 6: 0.250 -> 0.500, 2.00x"),
            std::string::npos)
      << SummaryText(s);
  s.iterations = 3;
  EXPECT_NE(SummaryText(s).find("first 1 iterations -> the last 1:"),
            std::string::npos)
      << SummaryText(s);
  s.iterations = 20;
  EXPECT_NE(SummaryText(s).find("first 10 iterations -> the last 10:"),
            std::string::npos)
      << SummaryText(s);
  s.iterations = 1;  // One iteration: no means at all.
  EXPECT_EQ(SummaryText(s).find("mean of"), std::string::npos)
      << SummaryText(s);
}

}  // namespace
}  // namespace hy::cli
