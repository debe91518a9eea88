// `coli run`: generate tokens from a prompt.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "runtime/session.h"

namespace coli {
namespace {

struct RunArgs {
    EngineOptions engine;
    std::string ids;
    int max_tokens = 32;
    SamplerOptions sampler;
    bool print_ids = false;
    bool ignore_eos = false;
};

void run(const RunArgs& a) {
    check(!a.ids.empty(), "coli run: give the prompt as --ids (text prompts need a tokenizer, not yet supported)");
    const std::vector<int32_t> prompt = ids_parse(a.ids);
    Engine engine(a.engine);
    const ModelSummary& m = engine.model().summary();
    ids_check(prompt, m.vocab);  // before anything is printed: a bad prompt is a one-line error
    fmt::print(stderr, "model: {} ({})\nweights: {}\nbackend: {}\n", m.family, m.architecture, m.formats,
               engine.backend().description());
    Session session(engine.model());
    Sampler sampler(a.sampler);
    const std::vector<int32_t> stop = a.ignore_eos ? std::vector<int32_t>{} : eos_ids(engine.checkpoint());
    const std::vector<int32_t> out = session.generate(prompt, a.max_tokens, sampler, stop);

    const GenerationStats& g = session.last_stats();
    fmt::print(stderr, "prompt: {} tokens in {:.3f} s ({:.2f} tok/s); decode: {} tokens in {:.3f} s ({:.2f} tok/s)\n",
               g.prompt_tokens, g.prompt_seconds, g.prompt_tokens / std::max(g.prompt_seconds, 1e-9),
               g.decode_tokens, g.decode_seconds, g.decode_tokens / std::max(g.decode_seconds, 1e-9));
    stats_print(engine);
    if (a.print_ids) fmt::print("{}\n", fmt::join(out, ","));
}

}  // namespace

void cmd_run_add(CLI::App& app) {
    auto args = std::make_shared<RunArgs>();
    CLI::App* cmd = app.add_subcommand("run", "Generate tokens from a prompt");
    model_flags_add(*cmd, args->engine);
    cmd->add_option("--ids", args->ids, "Prompt as comma-separated token ids");
    cmd->add_option("--max-tokens,-n", args->max_tokens, "Tokens to generate")->capture_default_str();
    cmd->add_option("--temperature", args->sampler.temperature, "Sampling temperature (0 = greedy)")
        ->capture_default_str();
    cmd->add_option("--top-k", args->sampler.top_k, "Keep the k most likely tokens (0 = all)")->capture_default_str();
    cmd->add_option("--top-p", args->sampler.top_p, "Nucleus sampling mass")->capture_default_str();
    cmd->add_option("--seed", args->sampler.seed, "Random seed for sampling")->capture_default_str();
    cmd->add_flag("--print-ids", args->print_ids, "Print the generated ids, comma-separated, as the last line");
    cmd->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at the end-of-sequence token");
    cmd->callback([args] { run(*args); });
}

}  // namespace coli
