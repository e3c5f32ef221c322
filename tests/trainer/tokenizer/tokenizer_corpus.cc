#include "tokenizer_corpus.h"

#include <unicode/uchar.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "chat_corpus.h"
#include "test_rng.h"

namespace hy::trainer::testing {
namespace {

void AppendCodePoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The pieces the generator draws from (kept in rows, not one per line).
// clang-format off
const std::vector<std::string> kWords = {
    "the", "of", "and", "a", "to", "in", "is", "you", "that", "it", "he",
    "was", "for", "on", "are", "as", "with", "his", "they", "I", "at", "be",
    "this", "have", "from", "or", "one", "had", "by", "word", "but", "not",
    "what", "all", "were", "we", "when", "your", "can", "said", "there",
    "Tokenizer", "reinforcement", "learning", "policy", "gradient", "PPO",
    "rollout", "checkpoint", "Hello", "World", "naïve", "café", "résumé",
    "München", "São", "Zürich", "Straße", "internationalization", "GPU",
    "HTTP", "JSON", "x", "Z", "mRNA", "iPhone", "McDonald", "O'Brien",
    "well-known", "e-mail", "U.S.A.", "3D", "A100", "H100", "v1.2.3",
};
const std::vector<std::string> kPunct = {
    ".", ",", "!", "?", ";", ":", " -", " —", "...", " (", ")", "\"", "'",
    " [", "]", " {", "}", " /", " &", " %", " $", " #", " @", " *", " +",
    " =", " <", ">", " |", " ~", " `", "^", "_", "…", "«", "»", "¿", "¡",
};
const std::vector<std::string> kContractions = {
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re",
    "'rE", "'VE", "'vE", "'M", "'LL", "'Ll", "'lL", "'D", "'ſ", "'K",
    "’s", "''", "'", "'x", "'sss", "'lll",
};
const std::vector<std::string> kSpecial = {
    "<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|begin_of_text|>",
    "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<think>", "</think>", "<tool_call>",
    "<|im_end", "|im_end|>", "<|<|im_end|>|>", "<|endoftext|><|endoftext|>",
    "<|reserved_special_token_5|>", "<|fim_prefix|>", "<|vision_pad|>", "<|",
    "|>", "<", "<||>",
};
const std::vector<std::string> kEmoji = {
    "😀", "😂", "🥲", "👍", "👍🏽", "👍🏿", "❤️", "🔥", "✨", "🚀", "🇺🇸",
    "🇯🇵", "🇩🇪", "🏳️‍🌈", "🏴‍☠️", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🧑‍🚀", "1️⃣",
    "#️⃣", "🫠", "🦀", "☕", "⚡", "©️", "™", "🤷‍♂️", "🙋🏻‍♀️", "👁️‍🗨️",
};
const std::vector<std::string> kAccents = {
    "é", "e\xCC\x81", "ñ", "n\xCC\x83", "Å", "A\xCC\x8A", "\xE2\x84\xAB",
    "Ω", "\xE2\x84\xA6", "ﬁ", "ǅ", "ẞ", "Tiếng Việt", "Ti\xE1\xBB\x87\xCC\x81ng",
    "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB", "한국어", "ü", "u\xCC\x88",
    "o\xCC\x88\xCC\x81", "a\xCC\x81\xCC\x80\xCC\x82", "\xCC\x81", "ç", "ø",
    "Ελληνικά", "русский", "العربية", "עברית", "हिन्दी", "ไทย", "ஆ",
    "e\xCC\xA3\xCC\x82", "\xE0\xA4\x95\xE0\xA4\xBC",
};
const std::vector<std::string> kWhitespace = {
    " ", "  ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\r\n",
    "\r\n\r\n", "\r", " \n", "\n ", " \t \n", "   \n\n   ", "\xC2\xA0",
    "\xE3\x80\x80", "\xC2\x85", "\xE2\x80\xA8", "\xE2\x80\x8B", "\xEF\xBB\xBF",
    "\x0B", "\x0C", " \r\n\t ",
};
const std::vector<std::string> kCode = {
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "if x != None and y >= 10:\n        print(f\"{x}={y!r}\")",
    "#include <vector>\nint main() { return 0; }\r\n",
    "const re = /\\s+(?!\\S)/gu; // regex\n",
    "SELECT id, name FROM users WHERE age > 30;\n",
    "    }\n  }\n}\n\n",
    "x = [1, 2, 3]; y = {'a': 1, \"b\": 2}\n",
    "$ ./build/bin/hyctl tokenize --tokenizer /tmp/qwen < in.jsonl\n",
    "<div class=\"row\"><span>&amp;</span></div>",
    "fn main() -> Result<(), Box<dyn Error>> {\n    Ok(())\n}",
    "0x7fff_ffff >> 3 == 268435455 && a[i++] -= b->c;",
};

// clang-format on

std::string Prose(Rng& rng, size_t words) {
  std::string s;
  for (size_t i = 0; i < words; ++i) {
    if (i > 0) s += rng.Below(8) == 0 ? "  " : " ";
    std::string w = rng.Pick(kWords);
    auto upper = [](char& c) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    };
    if (rng.Below(6) == 0) upper(w[0]);
    if (rng.Below(15) == 0) {
      for (char& c : w) upper(c);
    }
    s += w;
    if (rng.Below(5) == 0) s += rng.Pick(kPunct);
    if (rng.Below(12) == 0) s += rng.Pick(kContractions);
  }
  return s;
}

uint32_t AnyCodePoint(Rng& rng) {
  switch (rng.Below(8)) {
    case 0:
      return 0x20 + static_cast<uint32_t>(rng.Below(0x5F));
    case 1:
      return 0x01 + static_cast<uint32_t>(rng.Below(0x1F));  // controls
    case 2:
      return 0x80 + static_cast<uint32_t>(rng.Below(0x780));
    case 3:
      return 0x4E00 + static_cast<uint32_t>(rng.Below(0x5200));
    case 4:
      return 0x1F300 + static_cast<uint32_t>(rng.Below(0x300));
    case 5:
      return 0x10000 + static_cast<uint32_t>(rng.Below(0x20000));
    default: {
      uint32_t cp;
      do {
        cp = static_cast<uint32_t>(rng.Below(0x10000));
      } while (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF));
      return cp;
    }
  }
}

// A random code point assigned by Unicode 14. Characters added later are
// letters or combining marks only to newer tables: PCRE2 10.42 has Unicode
// 14, Debian's ICU 72 Unicode 15, Node 20's ICU Unicode 17, so they would
// tokenize differently for reasons of table versions, not of the tokenizer.
uint32_t RandomCodePoint(Rng& rng) {
  while (true) {
    const uint32_t cp = AnyCodePoint(rng);
    UVersionInfo age;
    u_charAge(static_cast<UChar32>(cp), age);
    if (age[0] == 0 || age[0] > 14) continue;  // unassigned, or too new
    return cp;
  }
}

constexpr int kPieceKinds = 11;  // the cases of Piece

std::string Piece(Rng& rng, int kind) {
  std::string s;
  switch (kind) {
    case 0:
      return Prose(rng, 1 + rng.Below(40));
    case 1: {  // CJK with punctuation, kana, hangul
      const size_t n = 1 + rng.Below(60);
      for (size_t i = 0; i < n; ++i) {
        const size_t r = rng.Below(10);
        if (r < 6)
          AppendCodePoint(0x4E00 + rng.Below(0x5000), &s);
        else if (r == 6)
          AppendCodePoint(0x3041 + rng.Below(0x56), &s);
        else if (r == 7)
          AppendCodePoint(0xAC00 + rng.Below(0x2BA4), &s);
        else if (r == 8)
          s += rng.Below(2) ? "，" : "。";
        else
          s += rng.Below(2) ? " " : "1";
      }
      return s;
    }
    case 2:
      for (size_t i = 0, n = 1 + rng.Below(12); i < n; ++i) {
        s += rng.Pick(kEmoji);
        if (rng.Below(3) == 0) s += rng.Below(2) ? " " : "a";
      }
      return s;
    case 3:
      for (size_t i = 0, n = 1 + rng.Below(12); i < n; ++i) {
        s += rng.Pick(kAccents);
        if (rng.Below(2) == 0) s += rng.Below(2) ? " " : rng.Pick(kWords);
      }
      return s;
    case 4:
      for (size_t i = 0, n = 1 + rng.Below(4); i < n; ++i) {
        for (size_t d = 0, len = 1 + rng.Below(40); d < len; ++d) {
          s.push_back(static_cast<char>('0' + rng.Below(10)));
        }
        s += rng.Below(3) == 0 ? "." : rng.Below(2) ? " " : ",";
      }
      return s;
    case 5:
      for (size_t i = 0, n = 1 + rng.Below(10); i < n; ++i) {
        s += rng.Pick(kWhitespace);
        if (rng.Below(2) == 0) s += rng.Pick(kWords);
      }
      return s;
    case 6:
      return rng.Pick(kCode);
    case 7:
      for (size_t i = 0, n = 1 + rng.Below(8); i < n; ++i) {
        s += rng.Pick(kWords) + rng.Pick(kContractions);
        s += rng.Below(3) == 0 ? "" : " ";
      }
      return s;
    case 8:  // special tokens (and near misses) inside text
      for (size_t i = 0, n = 1 + rng.Below(6); i < n; ++i) {
        s += rng.Below(2) ? rng.Pick(kSpecial) : " " + rng.Pick(kSpecial);
        if (rng.Below(2) == 0) s += rng.Pick(kWords);
        if (rng.Below(3) == 0) s += rng.Pick(kWhitespace);
      }
      return s;
    case 9:
      for (size_t i = 0, n = 1 + rng.Below(30); i < n; ++i) {
        AppendCodePoint(RandomCodePoint(rng), &s);
      }
      return s;
    default:  // a whole conversation in Qwen3's or Llama 3's chat format
      return MakeChatText(rng);
  }
}

}  // namespace

std::vector<std::string> MakeTokenizerCorpus(size_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::string> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const int kind = static_cast<int>(i % (kPieceKinds + 1));
    std::string s;
    if (kind == kPieceKinds) {  // a mix of every kind
      for (size_t k = 0, n = 2 + rng.Below(6); k < n; ++k) {
        s += Piece(rng, static_cast<int>(rng.Below(kPieceKinds)));
      }
    } else {
      s = Piece(rng, kind);
    }
    if (i % 997 == 0) {  // now and then a long one
      while (s.size() < 20000) {
        s += Piece(rng, static_cast<int>(rng.Below(kPieceKinds)));
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> MakeProseCodeCorpus(size_t bytes, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::string> docs;
  size_t total = 0;
  while (total < bytes) {
    std::string doc;
    while (doc.size() < 4096) {
      if (rng.Below(3) == 0) {
        doc += rng.Pick(kCode);
      } else {
        doc += Prose(rng, 10 + rng.Below(60));
        doc += rng.Below(3) == 0 ? "\n\n" : " ";
      }
    }
    total += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

bool WriteJsonLines(const std::vector<std::string>& texts,
                    const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (const std::string& t : texts) out << nlohmann::json(t).dump() << '\n';
  out.flush();
  return out.good();
}

}  // namespace hy::trainer::testing
