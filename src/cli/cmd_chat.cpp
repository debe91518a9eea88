// `coli chat`: an interactive multi-turn conversation that keeps the KV cache across turns.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/line_editor.h"
#include "core/error.h"
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
    "commands: /reset (forget the conversation), /stats (speed and expert cache), /system TEXT, /exit; "
    "Ctrl-C stops a reply, Ctrl-D quits\n";

void stats_show(Engine& engine, const Conversation& conversation) {
    const GenerationStats& g = conversation.session().last_stats();
    if (g.prompt_tokens == 0) {
        fmt::print(stderr, "no turn yet; context 0 of {}\n", engine.model().summary().max_ctx);
        stats_print(engine);
        return;
    }
    fmt::print(stderr,
               "last turn: prompt {} tokens {:.2f} tok/s, decode {} tokens {:.2f} tok/s; context {} of {}\n",
               g.prompt_tokens, g.prompt_tokens / std::max(g.prompt_seconds, 1e-9), g.decode_tokens,
               g.decode_tokens / std::max(g.decode_seconds, 1e-9), conversation.session().n_past(),
               engine.model().summary().max_ctx);
    drafts_print(g.drafts);
    stats_print(engine);
}

// One turn: the reply streamed to stdout until its end, the context's end or Ctrl-C. A turn that fails
// (a message longer than the context) is reported and leaves the conversation as it was.
void turn(const ChatArgs& a, Conversation& conversation, Sampler& sampler, const std::string& line) {
    LineEditor::interrupt_take();  // a Ctrl-C before the reply began is not meant for it
    TurnResult t;
    try {
        t = conversation.reply(line, a.max_tokens, sampler, [](const std::string& piece) {
            fmt::print("{}", piece);
            std::fflush(stdout);
            return !LineEditor::interrupt_pending();
        });
    } catch (const Error& e) {
        fmt::print(stderr, "coli: error: {}\n", e.what());
        return;
    }
    fmt::print("\n");
    std::fflush(stdout);
    if (t.dropped_turns > 0)
        fmt::print(stderr, "(context full: the oldest {} turn(s) were dropped; /reset starts over)\n",
                   t.dropped_turns);
    if (t.generated.finish == FinishReason::cancelled) fmt::print(stderr, "(reply stopped)\n");
    if (t.context_end) fmt::print(stderr, "(the reply reached the context's end; /reset starts over)\n");
    LineEditor::interrupt_take();
}

void chat(const ChatArgs& a) {
    Engine engine(a.engine);
    Conversation conversation(engine.model(), engine.checkpoint(), true);
    placement_print(engine);
    if (!a.system.empty()) conversation.system_set(a.system);
    Sampler sampler(a.sampler);
    LineEditor editor("> ");
    if (editor.interactive()) fmt::print(stderr, "{}", kHelp);
    std::string line;
    for (;;) {
        const LineEditor::Read read = editor.read(line);
        if (read == LineEditor::Read::end) break;
        if (read == LineEditor::Read::interrupted) {
            fmt::print(stderr, "^C (Ctrl-D or /exit quits)\n");
            continue;
        }
        if (line.empty()) continue;
        editor.history_add(line);
        if (line == "/exit" || line == "/quit") break;
        if (line == "/help") {
            fmt::print(stderr, "{}", kHelp);
        } else if (line == "/reset") {
            conversation.reset();
            fmt::print(stderr, "(conversation reset)\n");
        } else if (line == "/stats") {
            stats_show(engine, conversation);
        } else if (line.rfind("/system ", 0) == 0) {
            conversation.system_set(line.substr(8));
            conversation.reset();
            fmt::print(stderr, "(system message set; conversation reset)\n");
        } else if (line[0] == '/') {
            fmt::print(stderr, "unknown command {}\n{}", line, kHelp);
        } else {
            turn(a, conversation, sampler, line);
        }
    }
    if (editor.interactive()) fmt::print("\n");
}

}  // namespace

void cmd_chat_add(CLI::App& app) {
    auto args = std::make_shared<ChatArgs>();
    CLI::App* cmd = app.add_subcommand("chat", "Chat with a model interactively (reads turns from stdin)");
    model_flags_add(*cmd, args->engine, false);
    cmd->add_option("--max-tokens,-n", args->max_tokens, "Most tokens per reply")->capture_default_str();
    sampler_flags_add(*cmd, args->sampler);
    cmd->add_option("--system", args->system, "A system message");
    cmd->callback([args] {
        check(args->max_tokens > 0, "chat: --max-tokens must be at least 1, got {}", args->max_tokens);
        chat(*args);
    });
}

}  // namespace coli
