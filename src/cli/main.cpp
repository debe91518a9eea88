// coli: run Mixture-of-Experts models larger than RAM and VRAM.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
    CLI::App app{"coli: runs Mixture-of-Experts models larger than memory, streaming experts from disk"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "coli " COLI_VERSION);
    coli::cmd_run_add(app);
    coli::cmd_chat_add(app);
    coli::cmd_logits_add(app);
    coli::cmd_info_add(app);
    coli::cmd_synth_add(app);
    coli::cmd_bench_add(app);
    coli::cmd_bench_attention_add(app);
    coli::cmd_test_ops_add(app);
    coli::cmd_backends_add(app);
    coli::cmd_serve_add(app);
    coli::cmd_tokenize_add(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {  // --help, --version
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        fmt::print(stderr, "coli: error: {}\n", coli::parse_error_text(app, e, argc, argv));
        return 1;
    } catch (const coli::Error& e) {
        fmt::print(stderr, "coli: error: {}\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "coli: internal error: {}\n", e.what());
        return 2;
    }
    return 0;
}
