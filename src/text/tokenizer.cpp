#include "text/tokenizer.h"

#include <atomic>

#include "core/error.h"
#include "io/json.h"
#include "text/normalize.h"
#include "text/tokenizer_loader.h"
#include "text/utf8.h"

namespace coli::text {

namespace {

// The ids of recently seen short pieces, per thread (no locks on the encode path) and for one tokenizer at
// a time. Cleared when full rather than evicted piecemeal: simple, and real text refills it fast.
struct PieceCache {
    static constexpr size_t kMaxEntries = 1 << 16;
    uint64_t owner = 0;
    TokenTable index;             // piece -> entry number
    std::vector<uint32_t> begin;  // entry -> first id in ids (the entry's ids end where the next begin)
    std::vector<int32_t> ids;

    void reset(uint64_t new_owner) {
        owner = new_owner;
        index.clear();
        begin.clear();
        ids.clear();
    }
};

std::atomic<uint64_t> next_serial{1};

}  // namespace

Tokenizer::Tokenizer() : serial_(next_serial.fetch_add(1)) {}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& model_dir) {
    std::filesystem::path json_path = model_dir / "tokenizer.json";
    if (std::filesystem::exists(json_path)) {
        nlohmann::json tokenizer = json_read_file(json_path);
        std::filesystem::path config_path = model_dir / "tokenizer_config.json";
        std::optional<nlohmann::json> config;
        if (std::filesystem::exists(config_path)) config = json_read_file(config_path);
        return from_tokenizer_json(tokenizer, config ? &*config : nullptr, json_path.string());
    }
    if (std::filesystem::exists(model_dir / "tiktoken.model"))
        return TokenizerLoader::load_tiktoken_dir(model_dir);
    fail("{}: no tokenizer.json or tiktoken.model in the model directory", model_dir.string());
}

std::unique_ptr<Tokenizer> Tokenizer::from_tokenizer_json(const nlohmann::json& tokenizer,
                                                          const nlohmann::json* config,
                                                          std::string_view what) {
    return TokenizerLoader::from_tokenizer_json(tokenizer, config, what);
}

std::unique_ptr<Tokenizer> Tokenizer::from_tiktoken(std::string_view ranks_text, std::string_view pattern,
                                                    std::vector<AddedToken> specials, std::string_view what) {
    return TokenizerLoader::from_tiktoken(ranks_text, pattern, std::move(specials), what);
}

std::string Tokenizer::normalize(std::string_view text) const {
    std::string s(text);
    for (const NormalizerStep& step : normalizer_) {
        switch (step.kind) {
            case NormalizerStep::Kind::kNfc:
                s = nfc_normalize(s);
                break;
            case NormalizerStep::Kind::kPrepend:
                if (!s.empty()) s = step.text + s;  // HF prepends only to non-empty text
                break;
            case NormalizerStep::Kind::kReplace: {
                std::string out;
                if (step.regex) {
                    DecodedText d;
                    d.assign(s);
                    size_t from = 0, copied = 0;
                    while (auto m = step.regex->find(d.cps, from)) {
                        auto [b, e] = *m;
                        if (b == e) {
                            from = b + 1;
                            if (from > d.cps.size()) break;
                            continue;
                        }
                        out.append(s, d.offsets[copied], d.offsets[b] - d.offsets[copied]);
                        out += step.text;
                        copied = from = e;
                    }
                    out.append(s, d.offsets[copied]);
                } else {
                    size_t pos = 0;
                    for (size_t hit; (hit = s.find(step.literal, pos)) != std::string::npos;) {
                        out.append(s, pos, hit - pos);
                        out += step.text;
                        pos = hit + step.literal.size();
                    }
                    out.append(s, pos);
                }
                s = std::move(out);
                break;
            }
        }
    }
    return s;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    if (pre_tokenizer_.empty()) {
        bpe_.encode(text, out);
        return;
    }
    thread_local DecodedText decoded;
    thread_local std::vector<Piece> pieces;
    decoded.assign(text);
    pre_tokenize(pre_tokenizer_, decoded, pieces);
    thread_local PieceCache cache;
    if (cache.owner != serial_) cache.reset(serial_);
    for (Piece p : pieces) {
        uint32_t b = decoded.offsets[p.begin];
        std::string_view piece = text.substr(b, decoded.offsets[p.end] - b);
        if (piece.size() > kCachedPieceBytes) {
            bpe_.encode(piece, out);
            continue;
        }
        if (auto entry = cache.index.find(piece)) {
            uint32_t first = cache.begin[*entry];
            uint32_t last = static_cast<size_t>(*entry) + 1 < cache.begin.size()
                                ? cache.begin[*entry + 1]
                                : static_cast<uint32_t>(cache.ids.size());
            out.insert(out.end(), cache.ids.begin() + first, cache.ids.begin() + last);
            continue;
        }
        size_t before = out.size();
        bpe_.encode(piece, out);
        if (cache.begin.size() >= PieceCache::kMaxEntries) cache.reset(serial_);
        cache.index.insert(piece, static_cast<int32_t>(cache.begin.size()));
        cache.begin.push_back(static_cast<uint32_t>(cache.ids.size()));
        cache.ids.insert(cache.ids.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
    std::string sanitized;
    if (!utf8_is_valid(text)) {
        sanitized = utf8_sanitize(text);
        text = sanitized;
    }
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + prefix_ids_.size() + suffix_ids_.size());
    if (add_special) out.insert(out.end(), prefix_ids_.begin(), prefix_ids_.end());

    std::vector<Segment> raw_segments, normalized_segments;
    raw_added_.split(text, 0, text.size(), raw_segments);
    for (const Segment& seg : raw_segments) {
        if (seg.token >= 0) {
            out.push_back(seg.token);
            continue;
        }
        std::string_view plain = text.substr(seg.begin, seg.end - seg.begin);
        if (normalizer_.empty() && normalized_added_.empty()) {
            encode_plain(plain, out);
            continue;
        }
        std::string normalized = normalize(plain);
        normalized_segments.clear();
        normalized_added_.split(normalized, 0, normalized.size(), normalized_segments);
        for (const Segment& sub : normalized_segments) {
            if (sub.token >= 0)
                out.push_back(sub.token);
            else
                encode_plain(std::string_view(normalized).substr(sub.begin, sub.end - sub.begin), out);
        }
    }
    if (add_special) out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
    return out;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
    check(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary (0..{})", id,
          vocab_size() - 1);
    return id_bytes_[id];
}

bool Tokenizer::is_special(int32_t id) const {
    return id >= 0 && id < vocab_size() && special_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string bytes;
    for (int32_t id : ids) {
        const std::string& b = token_bytes(id);
        if (!(skip_special && special_[id])) bytes += b;
    }
    if (utf8_is_valid(bytes)) return bytes;
    return utf8_sanitize(bytes);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
    auto it = token_ids_.find(std::string(token));
    if (it == token_ids_.end()) return std::nullopt;
    return it->second;
}

}  // namespace coli::text
