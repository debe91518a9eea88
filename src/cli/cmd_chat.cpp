// `coli chat`: an interactive multi-turn conversation that keeps the KV cache across turns.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "runtime/conversation.h"

namespace coli {
namespace {

struct ChatArgs {
    EngineOptions engine;
    int max_tokens = 256;
    SamplerOptions sampler{0.7f, 40, 0.95f, 0};
    std::string system;
};

constexpr const char* kHelp =
    "commands: /reset (forget the conversation), /stats (speed and expert cache), /system TEXT, /exit\n";

void chat(const ChatArgs& a) {
    Engine engine(a.engine);
    Conversation conversation(engine.model(), engine.checkpoint(), true);
    if (!a.system.empty()) conversation.system_set(a.system);
    Sampler sampler(a.sampler);
    const bool interactive = isatty(STDIN_FILENO);
    if (interactive) fmt::print(stderr, "{}", kHelp);
    std::string line;
    for (;;) {
        if (interactive) {
            fmt::print("> ");
            std::fflush(stdout);
        }
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/help") {
            fmt::print(stderr, "{}", kHelp);
        } else if (line == "/reset") {
            conversation.reset();
            fmt::print(stderr, "(conversation reset)\n");
        } else if (line == "/stats") {
            const GenerationStats& g = conversation.session().last_stats();
            fmt::print(
                stderr,
                "last turn: prompt {} tokens {:.2f} tok/s, decode {} tokens {:.2f} tok/s; context {}\n",
                g.prompt_tokens, g.prompt_tokens / std::max(g.prompt_seconds, 1e-9), g.decode_tokens,
                g.decode_tokens / std::max(g.decode_seconds, 1e-9), conversation.session().n_past());
            stats_print(engine);
        } else if (line.rfind("/system ", 0) == 0) {
            conversation.system_set(line.substr(8));
            conversation.reset();
            fmt::print(stderr, "(system message set; conversation reset)\n");
        } else if (line[0] == '/') {
            fmt::print(stderr, "unknown command {}\n{}", line, kHelp);
        } else {
            conversation.reply(line, a.max_tokens, sampler, [](const std::string& piece) {
                fmt::print("{}", piece);
                std::fflush(stdout);
            });
            fmt::print("\n");
        }
    }
}

}  // namespace

void cmd_chat_add(CLI::App& app) {
    auto args = std::make_shared<ChatArgs>();
    CLI::App* cmd = app.add_subcommand("chat", "Chat with a model interactively (reads turns from stdin)");
    model_flags_add(*cmd, args->engine, false);
    cmd->add_option("--max-tokens,-n", args->max_tokens, "Most tokens per reply")->capture_default_str();
    sampler_flags_add(*cmd, args->sampler);
    cmd->add_option("--system", args->system, "A system message");
    cmd->callback([args] { chat(*args); });
}

}  // namespace coli
