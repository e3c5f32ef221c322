#include "hy/trainer/data/answer.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace hy::trainer {
namespace {

using Num = std::optional<std::string>;

TEST(AnswerTest, CanonicalForms) {
  EXPECT_EQ(CanonicalNumber("42"), Num("42"));
  EXPECT_EQ(CanonicalNumber(" +1,234.50\n"), Num("1234.5"));
  EXPECT_EQ(CanonicalNumber("7.0"), Num("7"));
  EXPECT_EQ(CanonicalNumber("007"), Num("7"));
  EXPECT_EQ(CanonicalNumber("-0.0"), Num("0"));
  EXPECT_EQ(CanonicalNumber("-12"), Num("-12"));
  EXPECT_EQ(CanonicalNumber("0.050"), Num("0.05"));
  EXPECT_EQ(CanonicalNumber("12,345,678"), Num("12345678"));
  EXPECT_EQ(CanonicalNumber(""), std::nullopt);
  EXPECT_EQ(CanonicalNumber("4 2"), std::nullopt);
  EXPECT_EQ(CanonicalNumber("1,23"), std::nullopt);  // Not a thousands group.
  EXPECT_EQ(CanonicalNumber("abc"), std::nullopt);
  EXPECT_EQ(CanonicalNumber("-"), std::nullopt);
}

TEST(AnswerTest, LastNumber) {
  EXPECT_EQ(LastNumber("19"), Num("19"));
  EXPECT_EQ(LastNumber("12+7=19"), Num("19"));
  EXPECT_EQ(LastNumber("12-7=5"), Num("5"));
  EXPECT_EQ(LastNumber("so x=-7"), Num("-7"));
  EXPECT_EQ(LastNumber("a-7"), Num("7"));  // A letter before: a hyphen.
  EXPECT_EQ(LastNumber("The answer is 1,234."), Num("1234"));
  EXPECT_EQ(LastNumber("pay $3.50 now"), Num("3.5"));
  EXPECT_EQ(LastNumber("1, 2, 3"), Num("3"));
  EXPECT_EQ(LastNumber("no digits"), std::nullopt);
  EXPECT_EQ(LastNumber(""), std::nullopt);
}

TEST(AnswerTest, MarkedAndFinalAnswers) {
  const std::string gsm8k =
      "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
      "Natalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72";
  EXPECT_EQ(MarkedAnswer(gsm8k), Num("72"));
  EXPECT_EQ(FinalAnswer(gsm8k), Num("72"));
  EXPECT_EQ(FinalAnswer("#### 5 and then 9"), Num("5"));
  EXPECT_EQ(FinalAnswer("#### 1 ... ####  -2,000"), Num("-2000"));
  // A marker without a number is no answer, whatever numbers come before.
  EXPECT_EQ(FinalAnswer("3 4 ####"), std::nullopt);
  EXPECT_EQ(FinalAnswer("3 4 #### x 5"), std::nullopt);
  EXPECT_EQ(MarkedAnswer("42"), std::nullopt);
  EXPECT_EQ(FinalAnswer("42"), Num("42"));
}

TEST(AnswerTest, HugeAndGarbageInputs) {
  const std::string huge(5000, '9');
  EXPECT_EQ(LastNumber("x " + huge), Num(huge));
  EXPECT_EQ(CanonicalNumber("000" + huge + ".000"), Num(huge));
  const char kGarbage[] = "\xff\xfe\x80 1\xc3\x28 2\xe2\x82 \x00 3";
  EXPECT_EQ(LastNumber(std::string(kGarbage, sizeof(kGarbage) - 1)), Num("3"));
  std::string bytes;
  for (int c = 0; c < 256; ++c) bytes += static_cast<char>(c);
  EXPECT_EQ(LastNumber(bytes + bytes), Num("123456789"));
}

}  // namespace
}  // namespace hy::trainer
