// The out-of-band TCP channel to the peer prdma-testpmd (rc_pingpong's exchange, kept open for the
// whole session): the side given a host connects, the other listens. Control path; it blocks
// only the main lcore, while the forwarding lcores keep the device running.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include <prdma/status.hpp>

namespace prdma::testpmd {

class PeerChannel {
public:
    PeerChannel(std::string host, std::uint16_t port) : host_(std::move(host)), port_(port) {}
    PeerChannel(const PeerChannel&) = delete;
    PeerChannel& operator=(const PeerChannel&) = delete;
    PeerChannel(PeerChannel&&) = delete;
    PeerChannel& operator=(PeerChannel&&) = delete;
    ~PeerChannel();

    // One message each way: `kind` and `index` must match the peer's (both sides ran the same
    // command), `mine` goes out and the peer's payload comes back in `theirs`.
    Status exchange(std::uint32_t kind, std::uint32_t index, std::span<const std::uint8_t> mine,
                    std::span<std::uint8_t> theirs);
    // The last message, once this side's lcores stopped polling its port: waits up to `wait`
    // for the peer's, so that neither port is closed while the other side still polls (DPDK
    // 22.11's memif can crash a side that polls while its peer disconnects). Ok when the peer
    // left first or there is no channel; not_connected when the peer stays (interactive).
    Status leave(std::chrono::milliseconds wait);
    [[nodiscard]] std::string describe() const;
    [[nodiscard]] bool connected() const { return fd_ >= 0; }

private:
    Status open();
    Status listen_and_accept();
    Status connect_to_host();
    Status write_all(const void* data, std::size_t size) const;
    Status read_all(void* data, std::size_t size, int timeout_ms = wait_ms);

    static constexpr int wait_ms = 60'000; // for the peer to come (its EAL may still be starting)
    static constexpr std::uint32_t kind_leave = 0xffff'ffffU;

    std::string host_; // empty: listen
    std::uint16_t port_;
    int fd_ = -1;
};

} // namespace prdma::testpmd
