// swroce's own control calls, beyond the rdmadev class (as DPDK's rte_pmd_<driver>.h add to
// ethdev): they take an rdmadev DeviceId and answer not_supported for a device of another driver.
//
// The rule every call here follows, as testpmd requires a port stopped to reconfigure it: call
// from the control path, and only while no thread is inside a burst on the device (every lcore
// that polls its CQs has stopped polling, or waits parked until the call returns). The injectors
// belong to the lcores that drive the queue groups (ENGINE.md "Ownership"); the call rewrites
// them in place, with no lock, so a burst running at the same time is a data race.
#pragma once

#include <prdma/rdmadev/types.hpp>
#include <prdma/status.hpp>

namespace prdma::swroce {

// Probabilities per frame, each in [0, 1), as the rx_*/tx_* devargs take them.
struct FaultProbabilities {
    double drop = 0;
    double reorder = 0;
    double duplicate = 0;
    double corrupt = 0;
    double delay = 0;
};

struct DeviceFaults {
    FaultProbabilities rx;
    FaultProbabilities tx;
};

// The rates the device injects now (its devargs, or the last set_faults).
Result<DeviceFaults> get_faults(rdma::DeviceId device);

// Replaces the rates of every queue group, both directions. Frames an injector still holds are
// released (freed) first, and each generator restarts from the devargs' seed, so a run after this
// call repeats as a fresh device's would; the *_injected counters keep counting. Fails with
// invalid_parameter naming the value for a rate outside [0, 1), with not_supported for a device of
// another driver or no device at all. See the rule above for when to call.
Status set_faults(rdma::DeviceId device, const DeviceFaults& faults);

} // namespace prdma::swroce
