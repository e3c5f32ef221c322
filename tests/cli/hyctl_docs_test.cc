// docs/cli.md against `hyctl --help`: every subcommand and every option its
// --help lists is in the page, under that subcommand's heading, and the page
// names no subcommand or option hyctl does not have. Runs hyctl as a real
// process.

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/hyctl_run.h"

namespace hy::cli {
namespace {

using hy::testing::CmdResult;
using hy::testing::RunCommand;

// What one `--help` lists.
struct Help {
  std::vector<std::string> subcommands;
  std::set<std::string> options;  // "--step", "-o", "--output", "STORE"...
};

// Parses CLI11's help: entries are the lines indented by exactly two spaces
// under "Positionals:", "Options:" and "Subcommands:".
Help ParseHelp(const std::string& text) {
  Help h;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') {
      section = line;
      continue;
    }
    if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') {
      continue;
    }
    const std::string first = line.substr(2, line.find(' ', 2) - 2);
    if (section == "Subcommands:") {
      h.subcommands.push_back(first);
    } else if (section == "Options:" || section == "Positionals:") {
      // "-o,--output" names two spellings; both must be documented.
      std::stringstream names(first);
      std::string name;
      while (std::getline(names, name, ',')) h.options.insert(name);
    }
  }
  return h;
}

CmdResult HyctlHelp(const std::string& command) {
  return RunCommand(std::string(hy::testing::kCleanEnv) + HYCTL_PATH + " " +
                    command + " --help");
}

// docs/cli.md cut at its "## hyctl <command>" headings: the text under each.
std::map<std::string, std::string> DocSections(const std::string& doc) {
  std::map<std::string, std::string> out;
  std::istringstream in(doc);
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.rfind("## hyctl ", 0) == 0) {
      current = line.substr(9);
      while (!current.empty() && current.back() == ' ') current.pop_back();
      out[current];
      continue;
    }
    if (line.rfind("## ", 0) == 0) current.clear();
    if (!current.empty()) out[current] += line + "\n";
  }
  return out;
}

// The `--flag` and `-x` names a section writes in backticks.
std::set<std::string> DocOptions(const std::string& text) {
  std::set<std::string> out;
  static const std::regex code("`([^`]*)`");
  static const std::regex flag("(^|[\\s,\\[|(])(--?[a-zA-Z][a-zA-Z0-9-]*)");
  for (std::sregex_iterator it(text.begin(), text.end(), code), end; it != end;
       ++it) {
    const std::string inside = (*it)[1];
    for (std::sregex_iterator f(inside.begin(), inside.end(), flag);
         f != std::sregex_iterator(); ++f) {
      out.insert((*f)[2]);
    }
  }
  return out;
}

// Whether `text` names `name` (a positional such as STORE, an option such
// as --step) as a whole word.
bool Mentions(const std::string& text, const std::string& name) {
  const std::regex word("(^|[^A-Za-z0-9_-])" + name + "($|[^A-Za-z0-9_-])");
  return std::regex_search(text, word);
}

TEST(HyctlDocsTest, CliPageMatchesHelp) {
  std::ifstream f(std::string(HY_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_TRUE(f.good()) << "docs/cli.md is missing";
  const std::string doc(std::istreambuf_iterator<char>(f), {});
  const std::map<std::string, std::string> sections = DocSections(doc);

  // Every command, nested ones (data gen-arith) included.
  std::vector<std::string> todo = {""};
  std::set<std::string> commands;
  while (!todo.empty()) {
    const std::string cmd = todo.back();
    todo.pop_back();
    CmdResult r = HyctlHelp(cmd);
    ASSERT_EQ(r.code, 0) << "hyctl " << cmd << " --help\n" << r.err;
    const Help help = ParseHelp(r.out);
    for (const std::string& sub : help.subcommands) {
      todo.push_back(cmd.empty() ? sub : cmd + " " + sub);
    }
    if (cmd.empty()) {
      // The top level's own options (--help, --version) are not a section.
      EXPECT_FALSE(help.subcommands.empty()) << r.out;
      continue;
    }
    commands.insert(cmd);
    auto it = sections.find(cmd);
    if (it == sections.end()) {
      ADD_FAILURE() << "docs/cli.md has no \"## hyctl " << cmd << "\"";
      continue;
    }
    for (const std::string& name : help.options) {
      if (name == "-h" || name == "--help") continue;
      EXPECT_TRUE(Mentions(it->second, name))
          << "docs/cli.md, hyctl " << cmd << ": " << name
          << " is in --help but not documented";
    }
    for (const std::string& name : DocOptions(it->second)) {
      EXPECT_TRUE(help.options.count(name) > 0)
          << "docs/cli.md, hyctl " << cmd << ": " << name
          << " is documented but hyctl " << cmd << " --help has no such "
          << "option";
    }
  }
  for (const auto& [name, text] : sections) {
#if !HY_WITH_TENSORBOARD
    // Built without cairo (the GPU machine's kit): no hyctl plot to list.
    if (name == "plot") {
      EXPECT_EQ(commands.count(name), 0u) << "hyctl plot without cairo?";
      continue;
    }
#endif
    EXPECT_TRUE(commands.count(name) > 0)
        << "docs/cli.md documents \"hyctl " << name
        << "\", which hyctl --help does not list";
  }
  // The exit codes hyctl --help lists, each in the page.
  CmdResult top = HyctlHelp("");
  std::istringstream in(top.out);
  std::string line;
  bool codes = false;
  int listed = 0;
  while (std::getline(in, line)) {
    if (line == "Exit codes:") {
      codes = true;
      continue;
    }
    if (!codes || line.rfind("  ", 0) != 0) continue;
    const std::string code = line.substr(2, line.find(' ', 2) - 2);
    ++listed;
    EXPECT_NE(doc.find("| " + code + " |"), std::string::npos)
        << "exit code " << code << " is not in docs/cli.md's table";
  }
  EXPECT_GE(listed, 5) << top.out;
}

// A mistyped command or option: CLI11's refusal (exit 64), then the
// nearest real name.
TEST(HyctlDocsTest, MistypedNamesGetADidYouMean) {
  const struct {
    const char* args;
    const char* hint;
  } cases[] = {
      {"inspekt /nowhere", "unknown command 'inspekt'; did you mean inspect?"},
      {"inspect /nowhere --stepp 2",
       "unknown option --stepp; did you mean "
       "--step?"},
      {"reshard /nowhere --too fsdp=2", "did you mean --to?"},
      {"train --nprc 2", "unknown option --nprc; did you mean --nproc?"},
  };
  for (const auto& c : cases) {
    CmdResult r = RunCommand(std::string(hy::testing::kCleanEnv) + HYCTL_PATH +
                             " " + c.args);
    EXPECT_EQ(r.code, 64) << c.args;
    EXPECT_NE(r.err.find(c.hint), std::string::npos) << c.args << ": " << r.err;
  }
  // Nothing near: no guess.
  CmdResult r = RunCommand(std::string(hy::testing::kCleanEnv) + HYCTL_PATH +
                           " inspect /nowhere --zzzzzzzz");
  EXPECT_EQ(r.code, 64);
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hy::cli
