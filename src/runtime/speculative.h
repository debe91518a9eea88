// Speculative decoding's acceptance rule. A draft head (Model::draft) proposes the next token d from its
// distribution q; the model then scores d in the same pass as the token after it, and d is kept by the
// standard rule (Leviathan et al. 2023, Chen et al. 2023): with probability min(1, p(d) / q(d)), else a
// token is drawn from the residual max(0, p - q), normalized. Every token then has exactly the
// probability p gives it, whatever q is: speculation changes speed, never the distribution, and under
// greedy decoding (p and q one-hot) it keeps d exactly when d is the argmax, so the tokens are plain
// decoding's.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "models/model.h"
#include "runtime/sampler.h"

namespace coli {

struct DraftVerdict {
    bool accepted = false;  // the draft was kept
    int32_t token = 0;      // the token at the draft's position: the draft, or the residual's draw
};

// p: the model's distribution at the draft's position; q: the draft head's, from which d was drawn.
// Both [vocab], as Sampler::probabilities gives them; the sampler's generator makes the draws.
DraftVerdict draft_verdict(std::span<const double> p, std::span<const double> q, int32_t d, Sampler& sampler);

// A draft d checked beside the last chosen token x in one pass over [x, d].
struct DraftCheck {
    bool accepted = false;
    // The tokens chosen, in order: the one at d's position (d itself when kept), then, when d was kept, the
    // one after it. Taken in full, they are also the tokens that follow the pass's kept rows: the next
    // draft's pairs.
    std::vector<int32_t> tokens;
};

// after_x, after_d: the model's logits at x's and d's positions [vocab]; q: the draft head's distribution.
DraftCheck draft_check(std::span<const float> after_x, std::span<const float> after_d,
                       std::span<const double> q, int32_t d, Sampler& sampler);

// Takes c's tokens through take, in order, while it says to go on, and drops from state the positions of the
// pass that the tokens taken do not fill (a chosen token's position is filled only by the pass after it:
// n_past -= 2 - taken). Returns whether generation goes on (every token taken).
bool draft_check_take(const DraftCheck& c, ModelState& state, const std::function<bool(int32_t)>& take);

// Counts of a generation's drafts, for `coli bench` and /metrics.
struct DraftStats {
    int64_t drafted = 0;   // drafts checked
    int64_t accepted = 0;  // of them, kept

    double acceptance() const { return drafted > 0 ? double(accepted) / double(drafted) : 0; }
};

}  // namespace coli
