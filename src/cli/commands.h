// The `coli` subcommands. Each adds itself to the app and runs when chosen; all report errors by
// throwing coli::Error, which main() prints on one line.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "runtime/engine.h"
#include "runtime/memory_plan.h"
#include "runtime/prefix_cache.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"

namespace coli {

// Flags shared by every command that loads a model. Without model_required, --model defaults to
// default_model_dir().
void model_flags_add(CLI::App& cmd, EngineOptions& opts, bool model_required = true);

// Every backend's own options (BackendEntry::options, e.g. --vk-device), into values by option name.
void backend_flags_add(CLI::App& cmd, std::map<std::string, std::string>& values);

// The bundled demo model: $COLI_MODEL if set, else models/demo in a folder above the binary (the repository
// of a build), else share/colibri/models/demo there (an installed coli).
std::filesystem::path default_model_dir();

// A prefix cache's flags as given, checked and converted by prefix_cache_options.
struct PrefixCacheArgs {
    double gb = 0;    // --prefix-cache-gb: RAM budget of the cached states, GB; 0 = off
    std::string dir;  // --cache-dir: where entries are also kept across restarts; "" = RAM only
};
// --prefix-cache-gb, --cache-dir.
void prefix_cache_flags_add(CLI::App& cmd, PrefixCacheArgs& args);
// Checks the flags (--cache-dir needs a budget) and converts them.
PrefixCacheOptions prefix_cache_options(const PrefixCacheArgs& args);

// --temperature, --top-k, --top-p, --seed.
void sampler_flags_add(CLI::App& cmd, SamplerOptions& opts);

// "3,17,42" -> {3, 17, 42}; throws coli::Error on anything else.
std::vector<int32_t> ids_parse(const std::string& text);

// A command-line error of CLI11 as the text of one `coli: error:` line: names the command, the word at
// fault and where help is (`coli run --help`).
std::string parse_error_text(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

// The statistics block printed to stderr after a run: ops, fallbacks, expert cache, routing.
void stats_print(Engine& engine);
// One line to stderr after a speculative generation: how many drafts were kept (nothing without drafts).
void drafts_print(const DraftStats& d);
// One line to stderr at the start of a run: where ops run, and where they fall back to.
void placement_print(Engine& engine);

void cmd_run_add(CLI::App& app);
void cmd_chat_add(CLI::App& app);
void cmd_logits_add(CLI::App& app);
void cmd_info_add(CLI::App& app);
void cmd_synth_add(CLI::App& app);
void cmd_bench_add(CLI::App& app);
void cmd_bench_attention_add(CLI::App& app);
void cmd_test_ops_add(CLI::App& app);
void cmd_backends_add(CLI::App& app);
void cmd_serve_add(CLI::App& app);
void cmd_tokenize_add(CLI::App& app);

}  // namespace coli
