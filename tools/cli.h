// The command-line conventions every C++ program in tools/ shares (README "Tools and
// commands"): CLI11 options, each described; --help ends with the program's exit statuses; a
// bad argument prints one line naming it and exits 2 (CLI11's own codes, 105-114, are not
// passed on: scripts check for 2).
#pragma once

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <string>

namespace mrc::tools {

inline constexpr int kExitBadArguments = 2;

// "Exit status: ..." under --help. `codes` lists what 0 and 1 mean for this program.
inline void set_exit_codes(CLI::App& app, const std::string& codes) {
  app.footer("Exit status: " + codes + ", 2 bad arguments (one line on stderr).");
}

// Parses; returns -1 to go on, else the status to exit with: 0 after --help/--version, 2 after
// a bad argument (one line: the program, what was wrong, where to look).
inline int parse(CLI::App& app, int argc, const char* const* argv) {
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

// A bad argument found after parsing (a range that depends on another option, a file that
// does not parse): one line, exit 2.
template <typename... Args>
int bad_argument(const CLI::App& app, fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stderr, "{}: {}\n", app.get_name(), fmt::format(f, std::forward<Args>(args)...));
  return kExitBadArguments;
}

}  // namespace mrc::tools
