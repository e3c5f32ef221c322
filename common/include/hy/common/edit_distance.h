// "Did you mean" for names a user mistypes: hyctl's commands and options,
// trainer config keys.
//
// Thread-safety: plain functions.

#ifndef HY_COMMON_EDIT_DISTANCE_H_
#define HY_COMMON_EDIT_DISTANCE_H_

#include <cstddef>
#include <string>
#include <vector>

namespace hy {

// Levenshtein distance of a and b: the fewest insertions, deletions and
// substitutions that turn one into the other.
size_t EditDistance(const std::string& a, const std::string& b);

// The candidate nearest `word` within `max_edits` edits (the first of
// equals), or "" when none is that near.
std::string NearestName(const std::string& word,
                        const std::vector<std::string>& candidates,
                        size_t max_edits = 3);

}  // namespace hy

#endif  // HY_COMMON_EDIT_DISTANCE_H_
