// The TCP connection perftest exchanges its messages on. Control path: it may make system calls,
// but it never blocks the device: while it waits for the peer it keeps calling `progress`, because
// a one-sided WRITE or READ from the peer still needs this side's engine to answer it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <prdma/status.hpp>

namespace prdma::perf {

class OobChannel {
public:
    using Progress = std::function<void()>;

    // Server: listen on `port` (all addresses, as perftest) and accept one client.
    static Result<OobChannel> accept(std::uint16_t port, std::chrono::milliseconds timeout);
    // Client: connect to `host`:`port`, retrying until `timeout` (the server may still be
    // starting).
    static Result<OobChannel> connect(const std::string& host, std::uint16_t port,
                                      std::chrono::milliseconds timeout);

    OobChannel(OobChannel&& other) noexcept;
    OobChannel& operator=(OobChannel&& other) noexcept;
    OobChannel(const OobChannel&) = delete;
    OobChannel& operator=(const OobChannel&) = delete;
    ~OobChannel();

    [[nodiscard]] bool is_client() const { return client_; }
    void set_progress(Progress progress) { progress_ = std::move(progress); }
    void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

    // perftest's ctx_xchg_data over ethernet: the client writes then reads, the server reads
    // then writes, `size` bytes each way.
    Status exchange(const void* mine, void* theirs, std::size_t size);
    Status write_all(const void* data, std::size_t size) const;
    Status read_all(void* data, std::size_t size);
    // The peer has closed the connection or is gone (a byte it sent and nobody read yet is not
    // a close). Does not wait.
    [[nodiscard]] bool peer_closed() const { return peek() == Peek::closed; }
    // The peer has sent something nobody read yet, or closed: it has moved past the phase
    // this side is still in (send_bw -c UD's sender is done). Does not wait or consume.
    [[nodiscard]] bool peer_moved_on() const { return peek() != Peek::nothing; }
    // End of the session: stop writing and wait until the peer has closed too, so neither side
    // tears its port down while the other is still sending (sends no byte perftest would see).
    Status finish();

private:
    enum class Peek : std::uint8_t { data, closed, nothing };
    [[nodiscard]] Peek peek() const;
    OobChannel(int fd, bool client) : fd_(fd), client_(client) {}
    int fd_ = -1;
    bool client_ = false;
    Progress progress_;
    std::chrono::milliseconds timeout_{std::chrono::seconds(60)};
};

} // namespace prdma::perf
