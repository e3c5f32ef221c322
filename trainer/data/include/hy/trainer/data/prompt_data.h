// PromptDataset: the training prompts, read from JSONL files (the config's
// data.train_files) before training starts, so bad input fails the run at
// once rather than at step 900.
//
// Each non-empty line is a JSON object with
//
//   "prompt"   a string, or a non-empty list of chat messages
//              [{"role": "system"|"user"|"assistant", "content": "..."}]
//   ...        any other fields a reward needs, e.g. "answer"
//
// Every field other than "prompt" is kept as text in PromptRecord::fields:
// a JSON string as its contents, anything else (a number, a list) as its
// compact JSON text ("answer": 42 becomes "42"). Lines that are empty or
// only whitespace are skipped; a UTF-8 byte order mark at the start of a
// file and '\r' before '\n' are ignored.
//
// Records keep the order of the files and of the lines in them; record i is
// the same on every rank. The fingerprint identifies the contents (not the
// names) of the files in order, so a resume can refuse a changed dataset
// (data_cursor.h).
//
// Ownership: the dataset owns its records. Thread-safety: immutable after
// Load; const methods may be called concurrently.

#ifndef HY_TRAINER_DATA_PROMPT_DATA_H_
#define HY_TRAINER_DATA_PROMPT_DATA_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/hash.h"
#include "hy/common/result.h"
#include "hy/trainer/tokenizer/prompt.h"

namespace hy::trainer {

struct PromptRecord {
  ChatPrompt prompt;
  // fields["answer"], or empty when the record has none.
  std::string answer;
  // Every top-level field except "prompt" (see above), "answer" included.
  std::map<std::string, std::string> fields;
  // "FILE:LINE" of the record, for messages.
  std::string source;
};

class PromptDataset {
 public:
  // Reads every record of `files`, in order.
  // Returns InvalidArgument when `files` is empty or holds no record;
  // NotFound naming a file that does not exist; IOError when one cannot be
  // read; InvalidArgument "FILE:LINE: ..." for a line that is not a JSON
  // object, lacks "prompt", has a "prompt" that is neither a string nor a
  // non-empty list of messages, or a message without a string "role" (one
  // of the known roles) and a string "content".
  static Result<PromptDataset> Load(const std::vector<std::string>& files);

  // Parses the JSONL text of one file; `file_name` prefixes messages.
  // Returns the errors Load returns for a line, or InvalidArgument when
  // `text` holds no record.
  static Result<PromptDataset> FromText(std::string_view text,
                                        std::string_view file_name);

  size_t size() const { return records_.size(); }

  // REQUIRES: i < size().
  const PromptRecord& record(size_t i) const { return records_[i]; }

  // xxh3-128 over each file's byte length (8 bytes, little-endian) and
  // bytes, in order.
  const Hash128& fingerprint() const { return fingerprint_; }

 private:
  PromptDataset() = default;

  std::vector<PromptRecord> records_;
  Hash128 fingerprint_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_PROMPT_DATA_H_
