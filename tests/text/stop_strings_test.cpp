#include "text/stop_strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace coli::text {
namespace {

// Feeds the pieces one by one and returns everything that came out.
std::string run(StopStrings& s, const std::vector<std::string>& pieces) {
    std::string out;
    for (const std::string& p : pieces) out += s.push(p);
    return out + s.finish();
}

TEST(StopStrings, NoStopsPassesEverythingAtOnce) {
    StopStrings s({});
    EXPECT_EQ(s.push("abc"), "abc");
    EXPECT_EQ(s.push("def"), "def");
    EXPECT_FALSE(s.stopped());
}

TEST(StopStrings, CutsBeforeTheStopString) {
    StopStrings s({"END"});
    EXPECT_EQ(run(s, {"hello ", "world END and more"}), "hello world ");
    EXPECT_TRUE(s.stopped());
    EXPECT_EQ(s.matched(), "END");
    EXPECT_EQ(s.push("after"), "");
}

TEST(StopStrings, HoldsBackAStopStringSplitAcrossPieces) {
    StopStrings s({"\n\n"});
    EXPECT_EQ(s.push("one\n"), "one");  // "\n" may start the stop string
    EXPECT_EQ(s.push("\ntwo"), "");
    EXPECT_TRUE(s.stopped());
}

TEST(StopStrings, ReleasesHeldTextThatDidNotMatch) {
    StopStrings s({"STOP"});
    EXPECT_EQ(s.push("a ST"), "a ");
    EXPECT_EQ(s.push("O"), "");
    EXPECT_EQ(s.push("RM"), "STORM");
    EXPECT_EQ(s.push(" ST"), " ");
    EXPECT_EQ(s.finish(), "ST");  // the end: nothing can complete it
    EXPECT_FALSE(s.stopped());
}

TEST(StopStrings, EarliestOccurrenceWins) {
    StopStrings s({"cd", "b"});
    EXPECT_EQ(run(s, {"abcd"}), "a");
    EXPECT_EQ(s.matched(), "b");
}

TEST(StopStrings, EmptyStopStringsAreIgnored) {
    StopStrings s({"", "x"});
    EXPECT_EQ(run(s, {"abc"}), "abc");
    EXPECT_FALSE(s.stopped());
}

TEST(StopStrings, MultiByteCharactersStayWhole) {
    StopStrings s({"é!"});
    // "é" (2 bytes) could start the stop string: held back, then released whole.
    EXPECT_EQ(s.push("café"), "caf");
    EXPECT_EQ(s.push("?"), "é?");
}

}  // namespace
}  // namespace coli::text
