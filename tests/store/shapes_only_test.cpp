// The store over a checkpoint of shapes only (Checkpoint::shapes, what `coli backends` records forwards on):
// every expert is handed out at once with its parts' names, dtypes and shapes and no bytes, and nothing is
// read, whichever the source.
#include <gtest/gtest.h>

#include <numeric>

#include "store/expert_store.h"
#include "synth_model.h"

namespace coli {
namespace {

using namespace store_test;

TEST(ShapesOnly, ExpertsComeWithTheirShapesAndNoBytes) {
    TempDir tmp;
    SynthModel m = write_synth_model(tmp.path());
    const auto real = m.open();
    std::vector<TensorInfo> infos;
    for (const TensorInfo& t : real->tensors())
        infos.push_back({.name = t.name, .dtype = t.dtype, .shape = t.shape});
    const auto shapes = Checkpoint::shapes("synth (shapes only)", real->config(), infos);
    for (ExpertSource source : {ExpertSource::read, ExpertSource::mapped}) {
        StoreOptions o;
        o.source = source;
        ExpertStore store(*shapes, m.layout(), o);
        std::vector<int> all(kExperts);
        std::iota(all.begin(), all.end(), 0);
        for (int l = 1; l < kLayers; ++l) {
            store.prefetch(l, std::vector<int>{0, 1});
            for (const ExpertHandle& h : store.fetch(l, all)) {
                ASSERT_GT(h.part_count(), 0u);
                for (size_t p = 0; p < h.part_count(); ++p) {
                    const TensorInfo& want = real->get(h.part_info(p).name);
                    EXPECT_EQ(h.part_info(p).shape, want.shape) << want.name;
                    EXPECT_EQ(h.part_info(p).dtype, want.dtype) << want.name;
                    EXPECT_TRUE(h.part(p).empty()) << want.name;
                }
            }
        }
        const StoreStats s = store.stats();
        EXPECT_EQ(s.bytes_read, 0u);
        EXPECT_EQ(s.hits + s.misses, uint64_t((kLayers - 1) * kExperts));
    }
}

}  // namespace
}  // namespace coli
