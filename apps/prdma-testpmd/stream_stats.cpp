// StreamStats arithmetic, for reports over a run (now minus what `start` or `clear stats` saw).
#include <algorithm>
#include <numeric>

#include "stream.hpp"

namespace prdma::testpmd {

StreamStats& StreamStats::operator-=(const StreamStats& base) noexcept {
    tx_posted -= base.tx_posted;
    tx_bytes -= base.tx_bytes;
    tx_completed -= base.tx_completed;
    tx_bytes_completed -= base.tx_bytes_completed;
    rx_ops -= base.rx_ops;
    rx_bytes -= base.rx_bytes;
    rx_verify_errors -= base.rx_verify_errors;
    echoed -= base.echoed;
    post_refused -= base.post_refused;
    for (std::size_t i = 0; i < wc_errors.size(); ++i) {
        wc_errors[i] -= base.wc_errors[i];
    }
    // A QP destroyed since the base was taken reads 0 from the device: count nothing for it.
    retransmissions -= std::min(retransmissions, base.retransmissions);
    timeouts -= std::min(timeouts, base.timeouts);
    return *this;
}

StreamStats& StreamStats::operator+=(const StreamStats& more) noexcept {
    tx_posted += more.tx_posted;
    tx_bytes += more.tx_bytes;
    tx_completed += more.tx_completed;
    tx_bytes_completed += more.tx_bytes_completed;
    rx_ops += more.rx_ops;
    rx_bytes += more.rx_bytes;
    rx_verify_errors += more.rx_verify_errors;
    echoed += more.echoed;
    post_refused += more.post_refused;
    for (std::size_t i = 0; i < wc_errors.size(); ++i) {
        wc_errors[i] += more.wc_errors[i];
    }
    retransmissions += more.retransmissions;
    timeouts += more.timeouts;
    return *this;
}

std::uint64_t StreamStats::errors() const noexcept {
    return std::accumulate(wc_errors.begin(), wc_errors.end(), std::uint64_t{0});
}

} // namespace prdma::testpmd
