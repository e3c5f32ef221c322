// The reference side of the tokenizer and chat template tests:
// tests/trainer/tokenizer/tokenize_reference.py run by the venv's interpreter
// (Hugging Face's Rust `tokenizers` and transformers, from PyPI) on the real
// Qwen3 / Llama 3 files of tests/data/tokenizers. Nothing here skips:
// a missing file, interpreter or package is a test failure (the files are in the
// repository; scripts/install-deps.sh makes .venv/).
//
// Thread-safety: the functions write only the files they are given.

#ifndef HY_TESTS_TRAINER_TOKENIZER_REFERENCE_H_
#define HY_TESTS_TRAINER_TOKENIZER_REFERENCE_H_

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hy/trainer/tokenizer/tokenizer.h"

namespace hy::trainer::testing {

// HY_TOKENIZER_DATA_DIR/<name>: "qwen3" or "llama3".
std::string TokenizerDir(const std::string& name);

// Success when both models' tokenizer.json and tokenizer_config.json and
// the interpreter exist; else a failure naming what is missing.
::testing::AssertionResult ReferenceFilesExist();

// Runs `tokenize_reference.py ARGS...`; a failure with the command when it
// does not exit 0 (exit 3: a package is missing).
::testing::AssertionResult RunReference(const std::vector<std::string>& args);

// One JSON value per line of `path`; a failure when a line is not JSON.
::testing::AssertionResult ReadJsonLines(const std::string& path,
                                         std::vector<nlohmann::json>* out);

// Writes one JSON value per line; a failure when the file cannot be written.
::testing::AssertionResult WriteJsonValues(
    const std::vector<nlohmann::json>& values, const std::string& path);

// Writes into `dir` a copy of Llama 3's files whose tokenizer.json has the
// post-processor Meta's file has (ByteLevel, then a template adding
// <|begin_of_text|>); the shared copy has only the ByteLevel part. Returns
// `dir`.
std::string WriteLlamaWithTemplate(const std::string& dir);

// The character that stands for `byte` in byte-level tokens (GPT-2's
// bytes_to_unicode), in UTF-8.
std::string ByteLevelChar(uint8_t byte);

// The id of the byte-level token of each byte; -1 where `tok` has none.
std::array<int32_t, 256> ByteTokenIds(const Tokenizer& tok);

}  // namespace hy::trainer::testing

#endif  // HY_TESTS_TRAINER_TOKENIZER_REFERENCE_H_
