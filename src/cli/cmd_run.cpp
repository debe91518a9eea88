// `coli run`: generate from a prompt given as text (streamed as text) or as token ids.
#include <fmt/format.h>

#include <algorithm>
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
    bool chat = false;             // render the prompt as a user turn with the model's chat template
    std::string system;            // system message for --chat
    PrefixCacheArgs prefix_cache;  // --prefix-cache-gb, --cache-dir
};

void header_print(Engine& engine) {
    const ModelSummary& m = engine.model().summary();
    fmt::print(stderr, "model: {} ({})\nweights: {}\nbackend: {}\n", m.family, m.architecture, m.formats,
               engine.backend().description());
    placement_print(engine);
}

void speed_print(Engine& engine, const GenerationStats& g) {
    fmt::print(stderr,
               "prompt: {} tokens in {:.3f} s ({:.2f} tok/s); decode: {} tokens in {:.3f} s ({:.2f} tok/s)\n",
               g.prompt_tokens, g.prompt_seconds, g.prompt_tokens / std::max(g.prompt_seconds, 1e-9),
               g.decode_tokens, g.decode_seconds, g.decode_tokens / std::max(g.decode_seconds, 1e-9));
    drafts_print(g.drafts);
    // A prompt needs each routed expert at most once: more than the model's expert bytes means re-reads.
    if (g.prompt_expert_bytes > 0)
        fmt::print(stderr, "prompt: {} of experts read, of the model's {}\n",
                   bytes_human(g.prompt_expert_bytes),
                   bytes_human(engine.model().store().total_expert_bytes()));
}

// The tokens a run may generate after a prompt of prompt_tokens: what was asked, or fewer where the context
// ends first (then a note on stderr says so once the run stops there).
int tokens_in_context(const RunArgs& a, Engine& engine, size_t prompt_tokens) {
    const int64_t ctx = engine.model().summary().max_ctx;
    check(static_cast<int64_t>(prompt_tokens) < ctx, "the prompt is {} tokens, the context is {} (--ctx)",
          prompt_tokens, ctx);
    return static_cast<int>(std::min<int64_t>(a.max_tokens, ctx - static_cast<int64_t>(prompt_tokens)));
}

void context_note(const RunArgs& a, Engine& engine, size_t prompt_tokens, size_t generated, int limit) {
    if (limit < a.max_tokens && static_cast<int>(generated) == limit)
        fmt::print(stderr,
                   "stopped at the context's end: {} prompt + {} generated tokens fill the context of {}\n",
                   prompt_tokens, generated, engine.model().summary().max_ctx);
}

// What the prefix cache did for this run's prompt, on stderr.
void prefix_cache_print(const PrefixCache* cache) {
    if (!cache) return;
    const PrefixCacheStats& s = cache->stats();
    fmt::print(
        stderr, "prefix cache: {} prompt tokens restored ({}), {} entries held ({}), {} read back at start\n",
        s.tokens_reused, bytes_human(s.bytes_restored), s.entries, bytes_human(s.bytes_held), s.files_loaded);
}

void run_ids(const RunArgs& a) {
    const std::vector<int32_t> prompt = ids_parse(a.ids);
    Engine engine(a.engine);
    ids_check(prompt, engine.model().summary().vocab);  // before anything is printed: a one-line error
    const int limit = tokens_in_context(a, engine, prompt.size());
    header_print(engine);
    Session session(engine.model());
    const PrefixCacheOptions cache_opts = prefix_cache_options(a.prefix_cache);
    std::unique_ptr<PrefixCache> cache;
    if (cache_opts.ram_bytes > 0)
        cache = std::make_unique<PrefixCache>(cache_opts, prefix_cache_fingerprint(engine, session.state()));
    const int64_t held = cache ? cache->prefill(session, prompt, 0, 0).held : 0;
    Sampler sampler(a.sampler);
    const std::vector<int32_t> stop = a.ignore_eos ? std::vector<int32_t>{} : eos_ids(engine.checkpoint());
    const std::vector<int32_t> out =
        session.generate(std::span(prompt).subspan(size_t(held)), limit, sampler, stop, {}, [&] {
            if (cache) cache->insert(session, prompt);
        });
    speed_print(engine, session.last_stats());
    prefix_cache_print(cache.get());
    stats_print(engine);
    context_note(a, engine, prompt.size(), out.size(), limit);
    if (a.print_ids) fmt::print("{}\n", fmt::join(out, ","));
}

void run_text(const RunArgs& a) {
    Engine engine(a.engine);
    Conversation conversation(engine.model(), engine.checkpoint(), a.chat);
    if (const PrefixCacheOptions cache_opts = prefix_cache_options(a.prefix_cache); cache_opts.ram_bytes > 0)
        conversation.prefix_cache_open(cache_opts, engine);
    std::vector<text::ChatMessage> messages;
    if (!a.system.empty()) messages.push_back({"system", a.system});
    messages.push_back({"user", a.prompt});
    const std::vector<int32_t> ids =
        a.chat ? conversation.text().chat_ids(messages) : conversation.text().prompt_ids(a.prompt);
    const int limit = tokens_in_context(a, engine, ids.size());
    header_print(engine);
    Sampler sampler(a.sampler);
    const GenerateOptions opts{
        limit, {}, a.ignore_eos, a.chat ? conversation.text().chat_system_tokens(messages, ids) : 0};
    const GenerateResult r = conversation.generate(ids, a.chat, opts, sampler, [](const std::string& piece) {
        fmt::print("{}", piece);
        std::fflush(stdout);
        return true;
    });
    fmt::print("\n");
    std::fflush(stdout);  // the text ends before the statistics on stderr begin, also through a pipe
    speed_print(engine, conversation.session().last_stats());
    prefix_cache_print(conversation.prefix_cache());
    stats_print(engine);
    context_note(a, engine, ids.size(), static_cast<size_t>(r.completion_tokens), limit);
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
    cmd->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at end-of-sequence tokens");
    cmd->add_flag("--chat", args->chat, "Render the prompt as a user turn with the model's chat template");
    cmd->add_option("--system", args->system, "With --chat: a system message");
    prefix_cache_flags_add(*cmd, args->prefix_cache);
    cmd->callback([args] {
        const RunArgs& a = *args;
        check(a.prompt.empty() != a.ids.empty(), "run: give either a prompt text or --ids");
        check(a.max_tokens > 0, "run: --max-tokens must be at least 1, got {}", a.max_tokens);
        // Flags that would otherwise be ignored are refused.
        check(a.ids.empty() || !a.chat, "run: --chat renders a text prompt; --ids are given as they are");
        check(!a.print_ids || !a.ids.empty(),
              "run: --print-ids prints the ids of an --ids run; a text prompt's output is its text");
        check(a.system.empty() || a.chat, "run: --system needs --chat (a plain prompt has no system turn)");
        if (!a.ids.empty()) return run_ids(a);
        run_text(a);
    });
}

}  // namespace coli
