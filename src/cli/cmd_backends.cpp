// `coli backends`: the model family x backend matrix, computed from the code. Each family's forward is
// recorded at its real size (family_op_calls: every op call, at decode n = 1 and prefill n = 512, for
// every weight format the family meets);
// each compiled backend answers, from its kernels alone, which of those calls it runs natively and which
// fall back to the CPU. --markdown writes the same as docs/backends.md.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <tuple>

#include "backend/registry.h"
#include "cli/commands.h"
#include "core/error.h"
#include "runtime/op_record.h"

namespace coli {
namespace {

struct BackendsArgs {
    bool markdown = false;                 // write the markdown file
    std::string out = "docs/backends.md";  // where
};

// A kind of op call as the matrix counts it: the op and what gives it kernels of its own (moe_experts'
// activation, a grouped matmul).
struct CallKind {
    OpKind op;     // the op
    GluKind glu;   // moe_experts: the experts' activation; silu for the other ops
    bool grouped;  // matmul: block-diagonal (groups > 1)
    auto operator<=>(const CallKind&) const = default;
};

CallKind kind_of(const OpDesc& d) {
    return {d.op, d.op == OpKind::moe_experts ? d.glu : GluKind::silu,
            d.op == OpKind::matmul && d.groups > 1};
}

std::string kind_name(const CallKind& k) {
    std::string name(op_name(k.op));
    if (k.op == OpKind::moe_experts) name += fmt::format(" ({})", glu_name(k.glu));
    if (k.grouped) name += " (grouped)";
    return name;
}

// The order the matrix lists formats in: the stored floats, block FP8, the --dense-bits encodings, MXFP4.
int format_rank(Format f) {
    constexpr Format kOrder[] = {Format::f32,      Format::bf16,     Format::f16,  Format::fp8_e4m3_block,
                                 Format::int8_row, Format::int4_g64, Format::mxfp4};
    return static_cast<int>(std::ranges::find(kOrder, f) - std::begin(kOrder));
}

// One counted combination: a kind of call in one weight format in one forward (decode or prefill).
struct Combination {
    CallKind kind;              // the kind of call
    Format format;              // its weight's format
    int64_t forward_tokens;     // kRecordDecode or kRecordPrefill
    std::vector<OpDesc> calls;  // the calls of this combination (their shapes differ)
};

// The calls grouped into combinations: kinds in the order the forward first makes them, then formats,
// then decode before prefill.
std::vector<Combination> combinations_of(const std::vector<OpCall>& calls) {
    std::vector<CallKind> kinds;
    std::map<std::tuple<CallKind, int, int64_t>, Combination> by;
    for (const OpCall& c : calls) {
        const CallKind k = kind_of(c.desc);
        if (std::ranges::find(kinds, k) == kinds.end()) kinds.push_back(k);
        auto [it, _] = by.try_emplace({k, format_rank(c.desc.format), c.forward_tokens},
                                      Combination{k, c.desc.format, c.forward_tokens, {}});
        it->second.calls.push_back(c.desc);
    }
    std::vector<Combination> out;
    for (const CallKind& k : kinds)
        for (auto& [key, combo] : by)
            if (std::get<0>(key) == k) out.push_back(combo);
    return out;
}

// What one backend does with one family's ops.
struct FamilyCell {
    int native = 0, total = 0;           // (kind, format, forward) combinations
    std::vector<std::string> fallbacks;  // "attention/f32 n=512"
    std::vector<std::string> host_ops;   // ops of the native ones run as host steps ("route_sigmoid_topk")
};

// A combination is native when the backend supports every call of it.
FamilyCell cell_of(const std::vector<Combination>& combos, const BackendInfo& b) {
    FamilyCell c;
    for (const Combination& combo : combos) {
        ++c.total;
        const bool native = b.support != nullptr &&
                            std::ranges::all_of(combo.calls, [&](const OpDesc& d) { return b.support(d); });
        if (!native) {
            c.fallbacks.push_back(fmt::format("{}/{} n={}", op_name(combo.kind.op), format_name(combo.format),
                                              combo.forward_tokens));
            continue;
        }
        ++c.native;
        const std::string op(op_name(combo.kind.op));
        const bool host = b.host_step != nullptr &&
                          std::ranges::any_of(combo.calls, [&](const OpDesc& d) { return b.host_step(d); });
        if (host && std::ranges::find(c.host_ops, op) == c.host_ops.end()) c.host_ops.push_back(op);
    }
    return c;
}

std::string cell_text(const FamilyCell& c, const BackendInfo& b) {
    if (b.support == nullptr) return "no backend yet";
    std::string host;
    for (const auto& op : c.host_ops) host += (host.empty() ? "; host steps: " : ", ") + op;
    if (c.native == c.total) return fmt::format("all native ({}{})", c.total, host);
    std::string list;
    for (const auto& f : c.fallbacks) list += (list.empty() ? "" : ", ") + f;
    return fmt::format("{}/{} native{}; cpu fallback: {}", c.native, c.total, host, list);
}

// The markdown table of one family: a row per kind of call, with its formats, its parameters at the
// family's size (each distinct set once) and each backend's answer.
std::string family_table(const FamilyOpCalls& f, const std::vector<Combination>& combos,
                         const std::vector<BackendInfo>& all) {
    std::string md = fmt::format("{}\n\n| op | formats | parameters |", f.source);
    for (const auto& b : all) md += fmt::format(" {} |", b.name);
    md += "\n|---|---|---|";
    for (size_t i = 0; i < all.size(); ++i) md += "---|";
    md += "\n";
    std::vector<CallKind> kinds;
    for (const Combination& c : combos)
        if (std::ranges::find(kinds, c.kind) == kinds.end()) kinds.push_back(c.kind);
    for (const CallKind& k : kinds) {
        std::vector<Combination> mine;
        std::vector<Format> seen;
        std::string formats;
        std::vector<std::string> params;
        for (const Combination& c : combos) {
            if (c.kind != k) continue;
            mine.push_back(c);
            if (std::ranges::find(seen, c.format) == seen.end()) {
                seen.push_back(c.format);
                formats += (formats.empty() ? "" : ", ") + std::string(format_name(c.format));
            }
            for (const OpDesc& d : c.calls)
                if (std::ranges::find(params, op_params_text(d)) == params.end())
                    params.push_back(op_params_text(d));
        }
        std::string params_text;
        for (const auto& p : params) params_text += (params_text.empty() ? "" : "; ") + p;
        md += fmt::format("| {} | {} | {} |", kind_name(k), formats, params_text);
        for (const auto& b : all) {
            const FamilyCell c = cell_of(mine, b);
            const std::string native = c.host_ops.empty() ? "native" : "native (host step)";
            md += fmt::format(" {} |", b.support == nullptr  ? "no backend yet"
                                       : c.native == c.total ? native
                                       : c.native == 0       ? "cpu fallback"
                                                       : fmt::format("{}/{} {}", c.native, c.total, native));
        }
        md += "\n";
    }
    return md;
}

void backends(const BackendsArgs& a) {
    const std::vector<BackendInfo> all = backend_list();
    const std::vector<std::string> families = model_families();

    fmt::print("backends in this build:\n");
    for (const auto& b : all)
        fmt::print("  {:<8} {:<13} {}\n", b.name,
                   b.available ? "available" : (b.compiled ? "no device" : "not built"), b.detail);
    fmt::print(
        "\nfamily x backend (ops at decode n={} and prefill n={}, every weight format the family meets):\n",
        kRecordDecode, kRecordPrefill);
    size_t width = 0;  // the longest family name, so that the backend column lines up
    for (const auto& fam : families) width = std::max(width, fam.size());
    std::map<std::string, FamilyOpCalls> calls;
    std::map<std::string, std::vector<Combination>> combos;
    for (const auto& fam : families) {
        calls[fam] = family_op_calls(fam);
        combos[fam] = combinations_of(calls[fam].calls);
        for (const auto& b : all)
            fmt::print("  {:<{}} {:<8} {}\n", fam, width, b.name, cell_text(cell_of(combos[fam], b), b));
    }
    if (!a.markdown) return;

    std::string md =
        "# Backends\n\n"
        "Generated by `coli backends --markdown`; do not edit by hand. Each model family's forward is "
        "recorded\n"
        "at the family's real size, every op call with its parameters, at decode (n = 1) and prefill (n = "
        "512),\n"
        "for every weight format the family meets; each backend answers from its kernels which of them it "
        "runs\n"
        "natively. A combination of an op, a format and a forward is native when the backend takes every "
        "call of\n"
        "it. Anything else runs on the CPU backend and is counted as a fallback (`coli run` prints the "
        "counts).\n"
        "Residency (`--vram-gb`) and the device's limits can add fallbacks at run time; `coli run` and "
        "`coli\n"
        "test-ops` show those. A host step is run by the backend with a read-back and work on the host (a "
        "router\n"
        "that routes on the host from the logits); `coli run` counts those apart.\n\n";
    md += "| family |";
    for (const auto& b : all) md += fmt::format(" {} |", b.name);
    md += "\n|---|";
    for (size_t i = 0; i < all.size(); ++i) md += "---|";
    md += "\n";
    for (const auto& fam : families) {
        md += fmt::format("| {} |", fam);
        for (const auto& b : all) md += fmt::format(" {} |", cell_text(cell_of(combos[fam], b), b));
        md += "\n";
    }
    for (const auto& fam : families)
        md += fmt::format("\n## {}\n\n{}", fam, family_table(calls[fam], combos[fam], all));
    std::ofstream f(a.out);
    check(f.good(), "coli backends: cannot write {}", a.out);
    f << md;
    fmt::print(stderr, "wrote {}\n", a.out);
}

}  // namespace

void cmd_backends_add(CLI::App& app) {
    auto args = std::make_shared<BackendsArgs>();
    CLI::App* cmd =
        app.add_subcommand("backends", "The model family x backend matrix, computed from the code");
    cmd->add_flag("--markdown", args->markdown, "Also write the matrix as markdown (docs/backends.md)");
    cmd->add_option("--out", args->out, "Where --markdown writes")->capture_default_str();
    cmd->callback([args] { backends(*args); });
}

}  // namespace coli
