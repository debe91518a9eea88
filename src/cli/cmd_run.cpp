// `coli run`: generate from a prompt given as text (streamed as text) or as token ids.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "runtime/conversation.h"
#include "runtime/session.h"

namespace coli {
namespace {

struct RunArgs {
    EngineOptions engine;
    std::string prompt;  // text prompt (positional)
    std::string ids;     // or token ids
    int max_tokens = 64;
    SamplerOptions sampler;
    bool print_ids = false;
    bool ignore_eos = false;
    bool chat = false;   // render the prompt as a user turn with the model's chat template
    std::string system;  // system message for --chat
};

void header_print(Engine& engine) {
    const ModelSummary& m = engine.model().summary();
    fmt::print(stderr, "model: {} ({})\nweights: {}\nbackend: {}\n", m.family, m.architecture, m.formats,
               engine.backend().description());
    placement_print(engine);
}

void speed_print(const GenerationStats& g) {
    fmt::print(stderr,
               "prompt: {} tokens in {:.3f} s ({:.2f} tok/s); decode: {} tokens in {:.3f} s ({:.2f} tok/s)\n",
               g.prompt_tokens, g.prompt_seconds, g.prompt_tokens / std::max(g.prompt_seconds, 1e-9),
               g.decode_tokens, g.decode_seconds, g.decode_tokens / std::max(g.decode_seconds, 1e-9));
}

void run_ids(const RunArgs& a) {
    const std::vector<int32_t> prompt = ids_parse(a.ids);
    Engine engine(a.engine);
    ids_check(prompt, engine.model().summary().vocab);  // before anything is printed: a one-line error
    header_print(engine);
    Session session(engine.model());
    Sampler sampler(a.sampler);
    const std::vector<int32_t> stop = a.ignore_eos ? std::vector<int32_t>{} : eos_ids(engine.checkpoint());
    const std::vector<int32_t> out = session.generate(prompt, a.max_tokens, sampler, stop);
    speed_print(session.last_stats());
    stats_print(engine);
    if (a.print_ids) fmt::print("{}\n", fmt::join(out, ","));
}

void run_text(const RunArgs& a) {
    Engine engine(a.engine);
    Conversation conversation(engine.model(), engine.checkpoint(), a.chat);
    header_print(engine);
    Sampler sampler(a.sampler);
    const auto stream = [](const std::string& piece) {
        fmt::print("{}", piece);
        std::fflush(stdout);
    };
    if (a.chat) {
        if (!a.system.empty()) conversation.system_set(a.system);
        conversation.reply(a.prompt, a.max_tokens, sampler, stream);
    } else {
        conversation.complete(a.prompt, a.max_tokens, sampler, stream);
    }
    fmt::print("\n");
    std::fflush(stdout);  // the text ends before the statistics on stderr begin, also through a pipe
    speed_print(conversation.session().last_stats());
    stats_print(engine);
}

}  // namespace

void cmd_run_add(CLI::App& app) {
    auto args = std::make_shared<RunArgs>();
    CLI::App* cmd = app.add_subcommand("run", "Generate from a text prompt (streamed) or from token ids");
    model_flags_add(*cmd, args->engine, false);
    cmd->add_option("prompt", args->prompt, "Prompt text");
    cmd->add_option("--ids", args->ids, "Prompt as comma-separated token ids instead of text");
    cmd->add_option("--max-tokens,-n", args->max_tokens, "Tokens to generate")->capture_default_str();
    sampler_flags_add(*cmd, args->sampler);
    cmd->add_flag("--print-ids", args->print_ids,
                  "With --ids: print the generated ids, comma-separated, last");
    cmd->add_flag("--ignore-eos", args->ignore_eos, "With --ids: do not stop at the end-of-sequence token");
    cmd->add_flag("--chat", args->chat, "Render the prompt as a user turn with the model's chat template");
    cmd->add_option("--system", args->system, "With --chat: a system message");
    cmd->callback([args] {
        check(args->prompt.empty() != args->ids.empty(), "coli run: give either a prompt text or --ids");
        if (!args->ids.empty()) return run_ids(*args);
        run_text(*args);
    });
}

}  // namespace coli
