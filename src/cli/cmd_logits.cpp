// `coli logits`: the logits at every position of a prompt, as a .npy file (for oracle comparisons).
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "io/npy.h"
#include "runtime/session.h"

namespace coli {
namespace {

struct LogitsArgs {
    EngineOptions engine;
    std::string ids;
    std::filesystem::path out;
};

void logits(const LogitsArgs& a) {
    const std::vector<int32_t> ids = ids_parse(a.ids);
    Engine engine(a.engine);
    placement_print(engine);
    Session session(engine.model());
    const std::vector<float> l = session.forward(ids, true);  // [T, vocab]
    const int64_t shape[] = {static_cast<int64_t>(ids.size()), engine.model().summary().vocab};
    npy_write_f32(a.out, shape, l);
    fmt::print(stderr, "wrote {} [{}, {}]\n", a.out.string(), shape[0], shape[1]);
    stats_print(engine);
}

}  // namespace

void cmd_logits_add(CLI::App& app) {
    auto args = std::make_shared<LogitsArgs>();
    CLI::App* cmd =
        app.add_subcommand("logits", "Write the logits at every position of --ids to a .npy file");
    model_flags_add(*cmd, args->engine);
    cmd->add_option("--ids", args->ids, "Input as comma-separated token ids")->required();
    cmd->add_option("--out,-o", args->out, "Output .npy file, float32 [T, vocab]")->required();
    cmd->callback([args] { logits(*args); });
}

}  // namespace coli
