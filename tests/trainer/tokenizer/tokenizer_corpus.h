// A deterministic corpus of varied UTF-8 strings for the tokenizer's
// comparison test against Hugging Face's Rust implementation and for
// hy_bench_tokenizer: ASCII prose, CJK, emoji (ZWJ sequences, flags, skin
// tones), accented and combining characters (NFC matters), digit runs,
// whitespace runs with tabs / CR LF / newlines, code, contractions in mixed
// case, special tokens written inside the text, whole conversations in
// Qwen3's and Llama 3's chat formats (chat_corpus.h: <|im_start|>,
// <|eot_id|>, <think> blocks), and random code points (those assigned by
// Unicode 14, see tokenizer_corpus.cc).

#ifndef HY_TESTS_TRAINER_TOKENIZER_CORPUS_H_
#define HY_TESTS_TRAINER_TOKENIZER_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace hy::trainer::testing {

// `count` strings, the same for the same (count, seed) on every platform.
std::vector<std::string> MakeTokenizerCorpus(size_t count, uint64_t seed);

// `bytes` (approximately) of prose and code, in documents of a few KiB: the
// kind of text a rollout tokenizes.
std::vector<std::string> MakeProseCodeCorpus(size_t bytes, uint64_t seed);

// Writes one JSON string per line. Returns false if the file cannot be
// written.
bool WriteJsonLines(const std::vector<std::string>& texts,
                    const std::string& path);

}  // namespace hy::trainer::testing

#endif  // HY_TESTS_TRAINER_TOKENIZER_CORPUS_H_
