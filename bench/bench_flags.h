// Command-line flags of the hy_bench_* binaries, through CLI11 (as hyctl's
// are), with the conventions every benchmark shares:
//   --json   one JSON document instead of the table;
//   --help   the flags, their defaults, exit 0;
//   a flag that is unknown, lacks its value, does not parse or is out of
//   its range: a line naming it on stderr, exit 64 (EX_USAGE), nothing
//   measured.
// Header-only; each benchmark adds its own flags to the App and calls
// ParseFlags first thing in main.

#ifndef HY_BENCH_BENCH_FLAGS_H_
#define HY_BENCH_BENCH_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

namespace hy::bench {

inline constexpr int kExitUsage = 64;

// A number of at least `min` (counts, sizes, repetitions), or above it with
// strict: the error names the value and the bound ("--reps: 0 is below 1").
inline CLI::Validator AtLeast(double min, bool strict = false) {
  char bound[32];
  std::snprintf(bound, sizeof(bound), "%g", min);
  return CLI::Validator(
      [min, strict, b = std::string(bound)](std::string& in) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(in.c_str(), &end);
        if (in.empty() || end == nullptr || *end != '\0') {
          return in + " is not a number";
        }
        if (strict ? v <= min : v < min) {
          return in + (strict ? " is not above " : " is below ") + b;
        }
        return std::string();
      },
      (strict ? ">" : ">=") + std::string(bound));
}

// A real number above 0 (--gib 0.01).
inline CLI::Validator Positive() { return AtLeast(0, /*strict=*/true); }

// Adds --json, bound to *json.
inline void AddJsonFlag(CLI::App* app, bool* json) {
  app->add_flag("--json", *json, "Print one JSON document instead of a table");
}

// Parses argv into the options added to `app`. Returns -1 when the
// benchmark should run; otherwise the exit code: 0 after --help, 64 for a
// usage error (CLI11's exception converted here, where it is met).
inline int ParseFlags(CLI::App* app, int argc, char** argv) {
  try {
    app->parse(argc, argv);
    return -1;
  } catch (const CLI::CallForHelp&) {
    std::cout << app->help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << app->get_name() << ": " << e.what()
              << " (--help lists the flags)\n";
    return kExitUsage;
  }
}

}  // namespace hy::bench

#endif  // HY_BENCH_BENCH_FLAGS_H_
