#include "text/pre_tokenizer.h"

#include <algorithm>

#include "text/utf8.h"

namespace coli::text {

void DecodedText::assign(std::string_view utf8) {
    cps.clear();
    offsets.clear();
    for (size_t i = 0; i < utf8.size();) {
        offsets.push_back(static_cast<uint32_t>(i));
        auto b = static_cast<uint8_t>(utf8[i]);
        if (b < 0x80) {
            cps.push_back(b);
            ++i;
            continue;
        }
        Utf8Step step = utf8_decode(utf8.substr(i));
        cps.push_back(step.cp);
        i += step.length;
    }
    offsets.push_back(static_cast<uint32_t>(utf8.size()));
}

namespace {

// One span of a piece: a match of the pattern or a gap between matches.
struct Span {
    uint32_t begin;
    uint32_t end;
    bool match;
};

void find_spans(const SplitStep& step, std::span<const char32_t> cps, Piece piece, std::vector<Span>& spans) {
    spans.clear();
    uint32_t gap_start = piece.begin;
    auto add = [&](uint32_t b, uint32_t e, bool m) {
        if (b < e) spans.push_back({b, e, m});
    };
    if (step.kind == SplitStep::Kind::kAsciiDigits) {
        for (uint32_t i = piece.begin; i < piece.end;) {
            bool digit = cps[i] >= '0' && cps[i] <= '9';
            uint32_t j = i + 1;
            while (j < piece.end && (cps[j] >= '0' && cps[j] <= '9') == digit) ++j;
            add(i, j, digit);
            i = j;
        }
    } else {
        std::span<const char32_t> text = cps.subspan(piece.begin, piece.end - piece.begin);
        size_t from = 0;
        while (from <= text.size()) {
            auto m = step.regex->find(text, from);
            if (!m) break;
            auto [b, e] = *m;
            if (b == e) {  // empty match: nothing to cut; step past it
                from = b + 1;
                continue;
            }
            add(gap_start, piece.begin + static_cast<uint32_t>(b), false);
            add(piece.begin + static_cast<uint32_t>(b), piece.begin + static_cast<uint32_t>(e), true);
            gap_start = piece.begin + static_cast<uint32_t>(e);
            from = e;
        }
        add(gap_start, piece.end, false);
    }
    if (step.invert)
        for (Span& s : spans) s.match = !s.match;
}

void apply_behavior(SplitBehavior behavior, const std::vector<Span>& spans, std::vector<Piece>& out) {
    switch (behavior) {
        case SplitBehavior::kRemoved:
            for (const Span& s : spans)
                if (!s.match) out.push_back({s.begin, s.end});
            break;
        case SplitBehavior::kIsolated:
            for (const Span& s : spans) out.push_back({s.begin, s.end});
            break;
        case SplitBehavior::kMergedWithPrevious: {
            // A match joins the span before it, unless that span is itself a match (as HF does).
            size_t first = out.size();
            bool previous_match = false;
            for (const Span& s : spans) {
                if (s.match && !previous_match && out.size() > first)
                    out.back().end = s.end;
                else
                    out.push_back({s.begin, s.end});
                previous_match = s.match;
            }
            break;
        }
        case SplitBehavior::kMergedWithNext: {
            // A match joins the span after it, unless that span is itself a match: decided right to left.
            size_t first = out.size();
            bool next_match = false;
            for (size_t i = spans.size(); i-- > 0;) {
                const Span& s = spans[i];
                if (s.match && !next_match && out.size() > first)
                    out.back().begin = s.begin;
                else
                    out.push_back({s.begin, s.end});
                next_match = s.match;
            }
            std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
            break;
        }
        case SplitBehavior::kContiguous: {
            bool last_match = false;
            for (size_t i = 0; i < spans.size(); ++i) {
                const Span& s = spans[i];
                if (i > 0 && s.match && last_match)
                    out.back().end = s.end;
                else
                    out.push_back({s.begin, s.end});
                last_match = s.match;
            }
            break;
        }
    }
}

}  // namespace

void pre_tokenize(const std::vector<SplitStep>& steps, const DecodedText& text, std::vector<Piece>& out) {
    out.clear();
    if (text.cps.empty()) return;
    out.push_back({0, static_cast<uint32_t>(text.cps.size())});
    thread_local std::vector<Piece> next;
    thread_local std::vector<Span> spans;
    for (const SplitStep& step : steps) {
        next.clear();
        for (Piece p : out) {
            find_spans(step, text.cps, p, spans);
            apply_behavior(step.behavior, spans, next);
        }
        out.swap(next);
    }
}

}  // namespace coli::text
