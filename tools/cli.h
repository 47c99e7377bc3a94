// The command-line conventions every C++ program in tools/ shares (README "Tools and
// commands"): CLI11 options, each described; --help ends with the program's exit statuses; a
// bad argument prints one line naming it and exits 2 (CLI11's own codes, 105-114, are not
// passed on: scripts check for 2).
#pragma once

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

namespace mrc::tools {

inline constexpr int kExitBadArguments = 2;

// "Exit status: ..." under --help. `codes` lists what 0 and 1 mean for this program;
// `two`, what 2 means where it is more than a bad argument (fail_setup: a peer absent or
// refusing).
inline void set_exit_codes(CLI::App& app, const std::string& codes,
                           const std::string& two = "bad arguments") {
  app.footer("Exit status: " + codes + ", 2 " + two + " (one line on stderr).");
}

// Numbers the parser would take but that no option means: a minus sign on an unsigned option
// (strtoull wraps "-1" to 2^64 - 1), an integer beyond 64 bits (strtoull saturates), NaN or
// infinity for a real number (every range check passes NaN). Added to every numeric option of
// `app` and its subcommands by parse().
inline void refuse_wrapping_numbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.starts_with("UINT");
    const bool is_integer = is_unsigned || type.starts_with("INT");
    const bool is_real = type.starts_with("FLOAT");
    if (!is_integer && !is_real) continue;
    opt->check(CLI::Validator(
        [is_unsigned, is_integer](std::string& in) -> std::string {
          const char* s = in.c_str();
          while (std::isspace(static_cast<unsigned char>(*s)))
            ++s;
          if (is_unsigned && *s == '-') return "Value " + in + " is negative";
          char* end = nullptr;
          errno = 0;
          if (is_integer) {
            if (is_unsigned)
              (void)std::strtoull(s, &end, 0);
            else
              (void)std::strtoll(s, &end, 0);
            if (end != s && errno == ERANGE) return "Value " + in + " is out of range";
          } else {
            const double v = std::strtod(s, &end);
            if (end != s && !std::isfinite(v)) return "Value " + in + " is not a finite number";
          }
          return {};
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>{}))
    refuse_wrapping_numbers(*sub);
}

// Parses; returns -1 to go on, else the status to exit with: 0 after --help/--version, 2 after
// a bad argument (one line: the program, what was wrong, where to look).
inline int parse(CLI::App& app, int argc, const char* const* argv) {
  refuse_wrapping_numbers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n') c = ' ';
    fmt::print(stderr, "{}: {} (see {} --help)\n", app.get_name(), what, app.get_name());
    return kExitBadArguments;
  }
  return -1;
}

// A failure before the program's work starts (a file that does not load, a peer that cannot
// be reached or refuses the test): one line "program: message" on stderr; returns the status
// of a bad argument, 2, for the caller to exit with.
inline int fail_setup(std::string_view program, std::string_view message) {
  fmt::print(stderr, "{}: {}\n", program, message);
  return kExitBadArguments;
}

// A bad argument found after parsing (a range that depends on another option, a file that
// does not parse): one line, exit 2.
template <typename... Args>
int bad_argument(const CLI::App& app, fmt::format_string<Args...> f, Args&&... args) {
  return fail_setup(app.get_name(), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mrc::tools
