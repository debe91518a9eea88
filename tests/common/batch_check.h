// Continuous batching against each sequence alone (nn/batch.h): three sequences of different prompts join a
// batch at different steps, feed their prompts in chunks of different sizes, decode greedily and leave at
// different steps; every step's logits of every sequence must be those it gets alone with the same chunks.
// A cache or state of one sequence read or written by another changes its logits, so this fails then.
// Header-only: tests/models (the CPU) and tests/backend (device backends) run it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/fixture.h"
#include "common/test_util.h"
#include "models/model.h"

namespace coli::test {

// One sequence of the check: its prompt, the sizes of the chunks it is fed in, when it joins, and how many
// tokens it decodes.
struct BatchSequence {
    std::vector<int32_t> prompt;
    std::vector<size_t> chunks;  // prompt chunk sizes, in order (summing to the prompt's size)
    int join_step = 0;           // the batch step at which its first chunk runs
    int decode = 0;              // greedy tokens fed after the prompt
};

// The inputs and the logits of every step of one sequence.
struct SequenceRun {
    std::vector<std::vector<int32_t>> inputs;  // what each step fed
    std::vector<std::vector<float>> logits;    // each step's last-row logits [vocab]
};

// Three sequences over a fixture's prompt: whole, reversed in chunks of 5, and rotated in two chunks; they
// join at steps 0, 1 and 3 and decode 6, 2 and 4 tokens.
inline std::vector<BatchSequence> batch_sequences(const std::vector<int32_t>& ids) {
    const size_t n = ids.size();
    std::vector<int32_t> reversed(ids.rbegin(), ids.rend());
    std::vector<int32_t> rotated(ids.begin() + n / 2, ids.end());
    rotated.insert(rotated.end(), ids.begin(), ids.begin() + n / 2);
    std::vector<size_t> fives(n / 5, 5);
    if (n % 5) fives.push_back(n % 5);
    return {{ids, {n}, 0, 6}, {reversed, fives, 1, 2}, {rotated, {n / 3, n - n / 3}, 3, 4}};
}

// Runs a sequence's chunks, then its greedy tokens, on a fresh state through Model::forward.
inline SequenceRun run_alone(Model& model, const BatchSequence& s, int64_t vocab) {
    std::unique_ptr<ModelState> state = model.state_new();
    SequenceRun run;
    size_t begin = 0;
    std::vector<int32_t> input;
    for (size_t step = 0;; ++step) {
        if (step < s.chunks.size()) {
            input.assign(s.prompt.begin() + begin, s.prompt.begin() + begin + s.chunks[step]);
            begin += s.chunks[step];
        } else if (step - s.chunks.size() < size_t(s.decode)) {
            input = {argmax_rows(run.logits.back(), vocab)[0]};
        } else {
            return run;
        }
        run.inputs.push_back(input);
        run.logits.push_back(model.ops().read(model.forward(input, *state, false)));
    }
}

// Runs all sequences together through Model::forward_batch, each as in run_alone.
inline std::vector<SequenceRun> run_batched(Model& model, const std::vector<BatchSequence>& seqs,
                                            int64_t vocab) {
    std::vector<std::unique_ptr<ModelState>> states;
    std::vector<SequenceRun> runs(seqs.size());
    std::vector<size_t> begin(seqs.size(), 0);
    for (size_t i = 0; i < seqs.size(); ++i) states.push_back(model.state_new());
    for (int step = 0;; ++step) {
        std::vector<SequenceStep> batch;
        std::vector<size_t> members;
        for (size_t i = 0; i < seqs.size(); ++i) {
            const BatchSequence& s = seqs[i];
            const int own = step - s.join_step;  // this sequence's own step
            if (own < 0) continue;
            std::vector<int32_t> input;
            if (size_t(own) < s.chunks.size()) {
                input.assign(s.prompt.begin() + begin[i], s.prompt.begin() + begin[i] + s.chunks[own]);
                begin[i] += s.chunks[own];
            } else if (size_t(own) - s.chunks.size() < size_t(s.decode)) {
                input = {argmax_rows(runs[i].logits.back(), vocab)[0]};
            } else {
                continue;
            }
            runs[i].inputs.push_back(std::move(input));
            members.push_back(i);
        }
        if (members.empty()) {
            if (std::all_of(seqs.begin(), seqs.end(),
                            [&](const BatchSequence& s) { return step > s.join_step; }))
                return runs;
            continue;
        }
        for (size_t i : members) batch.push_back({runs[i].inputs.back(), states[i].get()});
        const std::vector<float> logits = model.ops().read(model.forward_batch(batch));  // [members, vocab]
        for (size_t m = 0; m < members.size(); ++m)
            runs[members[m]].logits.emplace_back(logits.begin() + int64_t(m) * vocab,
                                                 logits.begin() + int64_t(m + 1) * vocab);
    }
}

// The largest max|diff| / max|alone| over every step of every sequence, and whether every step fed the same
// tokens (the greedy choices agree).
struct BatchComparison {
    double max_rel_diff = 0;
    bool same_inputs = true;
    bool bitwise = true;
};

inline BatchComparison batch_compare(Model& model, const std::vector<int32_t>& ids, int64_t vocab) {
    const std::vector<BatchSequence> seqs = batch_sequences(ids);
    const std::vector<SequenceRun> together = run_batched(model, seqs, vocab);
    BatchComparison c;
    for (size_t i = 0; i < seqs.size(); ++i) {
        const SequenceRun alone = run_alone(model, seqs[i], vocab);
        c.same_inputs = c.same_inputs && alone.inputs == together[i].inputs;
        for (size_t t = 0; t < std::min(alone.logits.size(), together[i].logits.size()); ++t) {
            c.max_rel_diff = std::max(c.max_rel_diff, max_rel_diff(together[i].logits[t], alone.logits[t]));
            c.bitwise = c.bitwise && together[i].logits[t] == alone.logits[t];
        }
    }
    return c;
}

}  // namespace coli::test
