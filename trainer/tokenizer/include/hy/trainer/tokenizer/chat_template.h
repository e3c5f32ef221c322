// ChatTemplate: a model directory's Hugging Face chat template, and the
// text it renders for chat messages, exactly as transformers'
// apply_chat_template(messages, tokenize=False, add_generation_prompt,
// **variables) renders it, because that is what renders it: hy runs the
// reference renderer (python -m hy_chat.render, python/hy_chat/render.py,
// in the interpreter of the project's .venv) once for all the prompts of a
// data load. Any template transformers renders, hy renders the same, with
// its default system turn, its generation prompt, enable_thinking and any
// other variable; an error the template raises (raise_exception) is an
// error naming the conversation, never a wrong prompt.
// docs/design/trainer.md says why this and not a Jinja engine in C++.
//
// Where the template is (as transformers 5 reads a directory): the file
// chat_template.jinja, else tokenizer_config.json's "chat_template" (a
// string, or a list of {"name", "template"} entries of which "default" is
// taken). The renderer checks that transformers loaded the same text.
//
// The interpreter: HY_CHAT_PYTHON, else the .venv's python3 this build was
// configured with; python/ of this source tree goes first on PYTHONPATH.
//
// Thread-safety: immutable after Load; Render may be called concurrently
// (each call runs its own process in its own temporary directory).

#ifndef HY_TRAINER_TOKENIZER_CHAT_TEMPLATE_H_
#define HY_TRAINER_TOKENIZER_CHAT_TEMPLATE_H_

#include <optional>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/tokenizer/prompt.h"

namespace hy::trainer {

// One conversation to render.
struct ChatRequest {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::string name;  // Where it came from, for errors ("" : its index).
};

// What one Render call gives back.
struct RenderedChats {
  std::vector<std::string> texts;  // One per request, in order.
  // What the template writes after an assistant message's content (from a
  // probe conversation): "<|im_end|>\n" for ChatML, "<|eot_id|>..." for
  // Llama 3; empty when it writes nothing there; nullopt when the probe
  // does not render.
  std::optional<std::string> turn_end;
};

class ChatTemplate {
 public:
  // Finds the template of the model (or tokenizer) directory `dir`.
  // Returns NotFound when neither file holds one, IOError when a file
  // cannot be read, InvalidArgument naming the file and field when
  // tokenizer_config.json is not JSON or its "chat_template" is neither a
  // string nor a list with a "default" entry.
  static Result<ChatTemplate> Load(const std::string& dir);

  // The template's text, and where it was found ("DIR/chat_template.jinja"
  // or "DIR/tokenizer_config.json: chat_template").
  const std::string& text() const { return text_; }
  const std::string& source() const { return source_; }

  // Renders every request in one run of the reference renderer.
  // `variables_json` is a JSON object of template variables every request
  // gets (e.g. {"enable_thinking": false}). Returns FailedPrecondition when
  // the renderer cannot run (no interpreter, no transformers: the message
  // says how to install it), InvalidArgument naming the request (its name,
  // else its index) and the template's own message when the template
  // fails on one, or
  // when transformers read another template than text().
  Result<RenderedChats> Render(const std::vector<ChatRequest>& requests,
                               const std::string& variables_json) const;

 private:
  ChatTemplate(std::string dir, std::string text, std::string source)
      : dir_(std::move(dir)),
        text_(std::move(text)),
        source_(std::move(source)) {}

  std::string dir_;
  std::string text_;
  std::string source_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_TOKENIZER_CHAT_TEMPLATE_H_
