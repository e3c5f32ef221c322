// Final answers: finding the number a response (or a reference answer)
// ends with, in canonical decimal form, for the rule-based rewards
// (reward.h). Numbers stay decimal strings, so a 500-digit number compares
// exactly and nothing overflows.
//
// A number is an optional sign, digits, optional ",ddd" thousands groups
// and an optional ".ddd" fraction: "1,234.50", "+7", "-3", "42.". A '-' or
// '+' is a sign only when no letter or digit is right before it ("12-7" is
// 12 and 7; "x=-7" is -7). Exponents ("1e3") and fractions ("3/4") are
// not numbers here (1, 3 and 4 are).
//
// Canonical form: no '+', no thousands commas, no leading zeros, no
// trailing fractional zeros (and no '.' when the fraction is zero), and "0"
// for zero whatever its sign: "+1,234.50" -> "1234.5", "-0.0" -> "0",
// "007" -> "7".
//
// Thread-safety: pure functions.

#ifndef HY_TRAINER_DATA_ANSWER_H_
#define HY_TRAINER_DATA_ANSWER_H_

#include <optional>
#include <string>
#include <string_view>

namespace hy::trainer {

// The canonical form of `text` when the whole of it (after trimming ASCII
// whitespace) is one number; nullopt otherwise.
std::optional<std::string> CanonicalNumber(std::string_view text);

// The first number in `text` after its last "####" (GSM8K style), skipping
// whitespace only; nullopt when `text` has no "####" or no number follows
// the last one.
std::optional<std::string> MarkedAnswer(std::string_view text);

// The last number in `text`; nullopt when it has none.
std::optional<std::string> LastNumber(std::string_view text);

// What the last "\boxed{...}" of `text` holds (braces balanced inside);
// nullopt when there is none or it is not closed.
std::optional<std::string_view> BoxedContent(std::string_view text);

// The final answer of `text`: the last number inside its last \boxed{}
// when it has one (MATH style), else MarkedAnswer when `text` has a
// "####", else LastNumber.
std::optional<std::string> FinalAnswer(std::string_view text);

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_ANSWER_H_
