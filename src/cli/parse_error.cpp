// Command-line errors (unknown command or flag, missing or malformed value) as one line naming the word
// at fault, worded like every other `coli: error: ...`.
#include <fmt/format.h>

#include <cctype>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace coli {

namespace {

std::string commands_list(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        names.push_back(sub->get_name());
    return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string parse_error_text(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
    const std::vector<CLI::App*> chosen = app.get_subcommands();
    if (chosen.empty()) {
        if (argc < 2)
            return fmt::format("no command given; the commands are {} (coli --help)", commands_list(app));
        const std::string first = argv[1];
        if (!first.empty() && first[0] != '-')
            return fmt::format("unknown command '{}'; the commands are {} (coli --help)", first,
                               commands_list(app));
        if (!app.get_option_no_throw(first)) return fmt::format("unknown option '{}' (coli --help)", first);
    }
    std::string what = e.what();
    // CLI11 starts its sentences with a capital ("The following argument was not expected: --x").
    if (what.size() > 1 && std::isupper(static_cast<unsigned char>(what[0])) &&
        std::islower(static_cast<unsigned char>(what[1])))
        what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
    if (chosen.empty()) return fmt::format("{} (coli --help)", what);
    const std::string name = chosen.back()->get_name();
    return fmt::format("{}: {} (coli {} --help)", name, what, name);
}

}  // namespace coli
