// The conformance suite runs against any driver through this: a factory that makes two devices
// of the driver on one link (and tears them down), plus what a test needs to connect them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <prdma/rdmadev/rdmadev.hpp>

namespace prdma::rdma::conformance {

class DevicePair {
public:
    virtual ~DevicePair() = default;
    [[nodiscard]] virtual DeviceId a() const = 0;
    [[nodiscard]] virtual DeviceId b() const = 0;
    [[nodiscard]] virtual Gid gid_a() const = 0;
    [[nodiscard]] virtual Gid gid_b() const = 0;
    // A GID on the link that nobody answers for (address resolution must fail).
    [[nodiscard]] virtual Gid unreachable_gid() const = 0;
    // Takes device a's link down or up, as a cable pull would; false if the driver's port can't.
    virtual bool set_link_a(bool up) = 0;
    // Devargs this driver must reject, with a word the error message must contain.
    [[nodiscard]] virtual std::vector<std::pair<std::string, std::string>> bad_devargs() const = 0;
    // Whether control requests on objects of a queue group another thread polls (and the last
    // deregistration while another thread polls the device) complete later: the conformance
    // suite then insists on the pending path; otherwise it accepts either.
    [[nodiscard]] virtual bool owned_group_pends() const { return false; }
};

struct DriverFactory {
    std::string name;
    std::function<std::unique_ptr<DevicePair>()> make;
};

struct PairOptions {
    std::string extra_a;                // appended to device a's devargs
    std::optional<std::string> extra_b; // to b's (default: a's)
    bool ipv6 = false;                  // fd00::1 / fd00::2 instead of 10.0.0.1 / 10.0.0.2
    unsigned queues = 1;                // queue groups (port queue pairs) per device
};

// One factory per driver, each in its own file.
DriverFactory swroce_factory(PairOptions options = {});

// Moves a created handle into `out` and says how the call went, as a Status: ok when the handle is
// ready, pending when it waits for its control completion, or the error. Tests of pending requests
// read more easily this way than through Result and ready().
template <typename Handle>
Status into(Handle& out, Result<Handle> made) {
    if (!made.ok()) {
        return made.error();
    }
    out = std::move(made.value());
    if (!out.ready()) {
        return Error(StatusCode::pending, "waits for its control completion");
    }
    return {};
}

} // namespace prdma::rdma::conformance
