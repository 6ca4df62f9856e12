// Fault rates changed at run time (include/prdma/swroce/swroce.hpp): the devargs' injectors
// configured again, with the devargs' depth, delay and seed.
#include <utility>

#include <rte_cycles.h>

#include <prdma/format.hpp>
#include <prdma/swroce/swroce.hpp>

#include "swroce_device.hpp"

namespace prdma::swroce {

namespace {

Result<SwroceDevice*> swroce_device(rdma::DeviceId id) {
    rdma::driver::Device* device = rdma::driver::device(id);
    if (device == nullptr || device->removed || device->config.ops != &swroce_ops) {
        return Error(StatusCode::not_supported,
                     strformat("rdma device %u is not an swroce device", unsigned{id}));
    }
    return static_cast<SwroceDevice*>(device->driver_private());
}

FaultRates to_rates(const FaultProbabilities& p) {
    return {.drop = p.drop,
            .reorder = p.reorder,
            .duplicate = p.duplicate,
            .corrupt = p.corrupt,
            .delay = p.delay};
}

FaultProbabilities to_probabilities(const FaultRates& r) {
    return {.drop = r.drop,
            .reorder = r.reorder,
            .duplicate = r.duplicate,
            .corrupt = r.corrupt,
            .delay = r.delay};
}

// The devargs' rule, [0, 1): a rate of 1 would stop every frame, which no run survives.
Status check(const FaultProbabilities& p, const char* direction) {
    const std::pair<const char*, double> rates[] = {{"drop", p.drop},
                                                    {"reorder", p.reorder},
                                                    {"duplicate", p.duplicate},
                                                    {"corrupt", p.corrupt},
                                                    {"delay", p.delay}};
    for (const auto& [name, rate] : rates) {
        if (!(rate >= 0 && rate < 1)) { // NaN fails too
            return Error(StatusCode::invalid_parameter,
                         strformat("%s_%s=%g: a probability is in [0, 1)", direction, name, rate));
        }
    }
    return {};
}

} // namespace

Result<DeviceFaults> get_faults(rdma::DeviceId device) {
    Result<SwroceDevice*> dev = swroce_device(device);
    if (!dev) {
        return dev.error();
    }
    return DeviceFaults{.rx = to_probabilities((*dev)->args.rx_faults),
                        .tx = to_probabilities((*dev)->args.tx_faults)};
}

Status set_faults(rdma::DeviceId device, const DeviceFaults& faults) {
    Result<SwroceDevice*> found = swroce_device(device);
    if (!found) {
        return found.error();
    }
    if (Status ok = check(faults.rx, "rx"); !ok) {
        return ok;
    }
    if (Status ok = check(faults.tx, "tx"); !ok) {
        return ok;
    }
    SwroceDevice& dev = **found;
    dev.args.rx_faults = to_rates(faults.rx);
    dev.args.tx_faults = to_rates(faults.tx);
    const std::uint64_t delay_cycles = dev.args.delay_us * rte_get_tsc_hz() / 1'000'000;
    for (unsigned group = 0; group < dev.groups.size(); ++group) {
        QueueGroupState& state = *dev.groups[group];
        state.rx_faults.configure(dev.args.rx_faults, dev.args.reorder_depth, delay_cycles,
                                  injector_seed(dev.args.seed, group, FaultDirection::rx));
        state.tx_faults.configure(dev.args.tx_faults, dev.args.reorder_depth, delay_cycles,
                                  injector_seed(dev.args.seed, group, FaultDirection::tx));
    }
    return {};
}

} // namespace prdma::swroce
