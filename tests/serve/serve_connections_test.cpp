// Connections that hold the server's HTTP threads (docs/reliability.md): idle keep-alive connections, and
// slow clients, each sending its request a byte a second, so that none ever finishes and none is closed by
// the read timeout (5 s between bytes). With more of them than a fixed pool of threads holds, a new request
// would wait for a thread (behind slow clients, for as long as they go on); the server must answer it at
// once.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "serve_process.h"

namespace coli::test {
namespace {

using nlohmann::json;

// More than the threads of the server before (its --queue, 1 here, + 32) and than those of the old
// measurement (100 idle connections, docs/reliability.md).
constexpr int kSlowClients = 100;
// Well within the server's read timeout (5 s): the slow clients are never dropped for being idle.
constexpr std::chrono::seconds kByteInterval{1};
// What the slow clients send, a byte at a time: a request whose headers never end within the test.
const std::string kSlowRequest =
    "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + std::string(4096, 'a');

// A TCP connection to the server on loopback; -1 when it fails.
int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// kSlowClients connections, each sending kSlowRequest a byte every kByteInterval from a thread of its own
// until destroyed.
class SlowClients {
public:
    explicit SlowClients(int port) {
        for (int i = 0; i < kSlowClients; ++i) {
            const int fd = connect_to(port);
            EXPECT_GE(fd, 0) << "connection " << i;
            if (fd >= 0) fds_.push_back(fd);
        }
        sender_ = std::thread([this] {
            for (size_t at = 0; !stop_ && at < kSlowRequest.size(); ++at) {
                for (int fd : fds_) (void)::send(fd, &kSlowRequest[at], 1, MSG_NOSIGNAL);
                ++bytes_sent_;
                std::this_thread::sleep_for(kByteInterval);
            }
        });
        while (bytes_sent_ == 0) std::this_thread::yield();  // every connection has started its request
    }
    ~SlowClients() {
        stop_ = true;
        sender_.join();
        for (int fd : fds_) ::close(fd);
    }

private:
    std::vector<int> fds_;
    std::atomic<bool> stop_{false};
    std::atomic<size_t> bytes_sent_{0};  // of each connection's request
    std::thread sender_;
};

// kSlowClients keep-alive connections that each had a request answered and then say nothing: the server
// holds each on a thread until its keep-alive timeout (5 s).
class IdleConnections {
public:
    explicit IdleConnections(int port) {
        const std::string request = "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n";
        for (int i = 0; i < kSlowClients; ++i) {
            const int fd = connect_to(port);
            EXPECT_GE(fd, 0) << "connection " << i;
            if (fd < 0) continue;
            fds_.push_back(fd);
            EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
        }
        // Every answer read: each connection is now idle on a server thread, waiting for its next request.
        for (int fd : fds_) {
            char answer[kAnswerBytes];
            EXPECT_GT(::recv(fd, answer, sizeof answer, 0), 0);
        }
    }
    ~IdleConnections() {
        for (int fd : fds_) ::close(fd);
    }

private:
    static constexpr size_t kAnswerBytes = 4096;  // more than /health's whole answer
    std::vector<int> fds_;
};

// 100 idle keep-alive connections, more than a pool of --queue + 32 threads would hold: a request is still
// served. The server closes idle connections after 5 s, so only the client's timeouts guard against a hang
// here; the slow clients below are the case that fails on a fixed pool.
TEST(ServeConnections, IdleKeepAliveConnectionsBeyondTheOldThreadCountDoNotHoldUpARequest) {
    ServeProcess server({"--queue", "1"});
    const IdleConnections idle(server.port());
    const auto health = server.client()->Get("/health");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
}

TEST(ServeConnections, SlowClientsBeyondTheOldThreadCountDoNotHoldUpARequest) {
    const std::string body = greedy_completion_body(4);
    ServeProcess server({"--queue", "1"});
    const auto clean = server.client()->Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(clean);
    ASSERT_EQ(clean->status, 200) << clean->body;

    const SlowClients slow(server.port());
    // The client's timeouts (60 s) are the hang guard: the slow clients go on for far longer than that.
    const auto health = server.client()->Get("/health");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    const auto r = server.client()->Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], json::parse(clean->body)["choices"][0]["text"]);
}

}  // namespace
}  // namespace coli::test
