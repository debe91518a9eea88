// The store issues a request's reads in disk order (file, then offset), not in expert-id order, on a
// checkpoint whose experts are stored out of id order (synth_model.h); the handles still come back in the
// order asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

#include "store/synth_model.h"

namespace coli::store_test {
namespace {

using Read = std::pair<int, uint64_t>;  // (file, offset)

// Where each expert of `layer` starts on disk: its first tensor, from the checkpoint's headers.
std::vector<Read> expert_starts(const Checkpoint& ckpt, int layer) {
    std::vector<Read> starts;
    for (int e = 0; e < kExperts; ++e) {
        Read first{INT_MAX, 0};
        for (int p = 0; p < kParts; ++p) {
            const TensorInfo& t = ckpt.get(SynthModel::tensor_name(layer, e, p));
            first = std::min(first, Read{t.file, t.offset});
        }
        starts.push_back(first);
    }
    return starts;
}

class ReadOrder : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = write_synth_model(dir_.path());
        ckpt_ = model_.open();
        opts_.io_threads = 1;
        opts_.read_issued = [this](int file, uint64_t offset) { issued_.emplace_back(file, offset); };
    }

    TempDir dir_{"read-order"};
    SynthModel model_;
    std::unique_ptr<Checkpoint> ckpt_;
    StoreOptions opts_;
    std::vector<Read> issued_;
};

TEST_F(ReadOrder, FetchReadsInDiskOrderAndAnswersInRequestOrder) {
    // Layer 1 keeps each expert's parts adjacent: one read per expert, at its first tensor.
    const std::vector<Read> starts = expert_starts(*ckpt_, 1);
    ASSERT_FALSE(std::is_sorted(starts.begin(), starts.end()))
        << "the experts should be stored out of id order";
    ExpertStore store(*ckpt_, model_.layout(), opts_);
    const std::vector<int> ids = {0, 1, 2, 3, 4, 5, 6, 7};
    const std::vector<ExpertHandle> handles = store.fetch(1, ids);

    std::vector<Read> want = starts;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(issued_, want);
    ASSERT_EQ(handles.size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
        EXPECT_EQ(handles[i].expert(), ids[i]);
        expect_expert_bytes(model_, handles[i]);
    }
}

TEST_F(ReadOrder, PrefetchReadsInDiskOrder) {
    ExpertStore store(*ckpt_, model_.layout(), opts_);
    const std::vector<int> descending = {7, 6, 5, 4, 3, 2, 1, 0};
    store.prefetch(2, descending);
    std::vector<Read> want = expert_starts(*ckpt_, 2);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(issued_, want);
}

TEST_F(ReadOrder, ExpertsOfSeveralReadsAreInterleavedByOffset) {
    // Layer 3's parts are scattered among large fillers: some experts take several reads, and all of
    // them go out as one sequence sorted by offset.
    ExpertStore store(*ckpt_, model_.layout(), opts_);
    store.fetch(3, std::vector<int>{7, 6, 5, 4, 3, 2, 1, 0});
    EXPECT_GT(issued_.size(), size_t(kExperts)) << "expected some expert of layer 3 to need several reads";
    EXPECT_TRUE(std::is_sorted(issued_.begin(), issued_.end()));
}

}  // namespace
}  // namespace coli::store_test
