// swroce's control path, split by object as rxe splits rxe_qp.c and rxe_cq.c: CQs
// (cq_control.cpp), QPs (qp_control.cpp), the requests a queue group's owner runs
// (owner_mailbox.cpp), neighbour resolution's side of the device (neighbour.cpp), peers' MACs
// (peer_resolution.cpp), address handles (address_handle.cpp), statistics and telemetry
// (statistics.cpp), and the device's ops table with memory and control progress
// (swroce_control.cpp). What one file calls in another is declared here; the driver's other files
// see only engine.hpp and swroce_device.hpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <prdma/rdmadev/driver.hpp>

#include "engine.hpp"
#include "swroce_device.hpp"

namespace prdma::swroce {

using rdma::driver::ControlToken;
using rdma::driver::Device;

inline SwroceDevice& swroce(Device& device) {
    return *static_cast<SwroceDevice*>(device.driver_private());
}

// ---- neighbours: ARP or neighbour discovery (neighbour.cpp), run under group 0's hold

void send_control_frame(SwroceDevice& dev, std::span<const std::uint8_t> frame,
                        SwroceCounters& counters);
// The device has a resolver for the peer's family (ARP for IPv4-mapped GIDs, ND for IPv6).
bool resolves(const SwroceDevice& dev, const rdma::Gid& peer) noexcept;
std::string_view resolution_protocol(const SwroceDevice& dev) noexcept;
std::optional<MacAddress> neighbour_lookup(const SwroceDevice& dev, const rdma::Gid& peer,
                                           std::uint64_t now) noexcept;
// Asks the resolver for `peer`, and sends the request it makes.
NeighbourRequestResult neighbour_request(SwroceDevice& dev, const rdma::Gid& peer,
                                         std::uint64_t now, SwroceCounters& counters) noexcept;
std::size_t neighbour_pending_count(const SwroceDevice& dev) noexcept;
unsigned neighbour_max_tries(const SwroceDevice& dev) noexcept;
// GroupWork::resolve_neighbour, run by group 0's holder: the MAC from the table, or a request on
// the wire (or the one in flight) whose outcome reaches the control path through
// neighbour_outcomes.
void start_resolution(SwroceDevice& dev, GroupRequest& request) noexcept;

// ---- the owner mailbox (owner_mailbox.cpp)

Error owned_elsewhere(unsigned group, const char* what);
Error pending_on_owner(unsigned group);
Status send_to_owner(SwroceDevice& dev, std::unique_ptr<GroupRequest> request);
// The same for a destroy, which is never refused: one the mailbox cannot take yet waits in
// SwroceDevice::unsent_destroys.
void send_destroy_to_owner(SwroceDevice& dev, std::unique_ptr<GroupRequest> request);
std::unique_ptr<GroupRequest> make_request(GroupWork work, unsigned group,
                                           const ControlToken& token);
void collect_group_requests(Device& device);

// ---- CQs (cq_control.cpp)

Status create_cq(Device& device, const rdma::driver::CqInit& init, const ControlToken& token,
                 void** out);
void erase_cq(SwroceDevice& dev, const SwroceCq* cq);
Status destroy_cq(Device& device, void* queue, const ControlToken& token);

// ---- QPs (qp_control.cpp)

void publish_qp(SwroceDevice& dev, std::unique_ptr<SwroceQp>& qp) noexcept;
Status create_qp(Device& device, const rdma::driver::QpInit& init, const ControlToken& token,
                 rdma::driver::QpCreated& out);
void free_qp(SwroceDevice& dev, SwroceQp* qp);
void apply_modify(SwroceQp& qp, const QpModify& modify) noexcept;
Status modify_qp(Device& device, void* queue, const rdma::QpAttr& attr, rdma::QpAttrMask mask,
                 const ControlToken& token);
Status destroy_qp(Device& device, void* queue, const ControlToken& token);
std::uint32_t qp_send_psn(Device&, void* queue);
mem::ConnectionId qp_connection(Device&, void* queue);
rdma::QpState qp_state(Device&, void* queue);
// Applies a modify now when this thread may drive the QP's group (ok), or sends it to the owner
// (pending; the owner's completion carries `token`).
Status apply_or_send_modify(SwroceDevice& dev, SwroceQp& qp, const QpModify& modify,
                            const ControlToken& token);

// ---- peers' MACs (peer_resolution.cpp)

// The MAC of peer `pending.peer`: known now, or pending (`pending` waits in pending_resolutions
// and finishes when the resolver answers or gives up), or why it cannot be asked for.
Result<MacAddress> resolve_peer(SwroceDevice& dev, const PendingResolution& pending);
// Why a peer of the other IP family than the device's cannot be resolved.
Error unresolvable_peer(const SwroceDevice& dev, const rdma::Gid& peer);
// Takes the waiting requests `match` selects out of the device's list, in their order.
std::vector<PendingResolution>
take_pending(SwroceDevice& dev, const std::function<bool(const PendingResolution&)>& match);
// Finishes what waits on the outcomes group 0's holder recorded (control path).
void finish_neighbour_outcomes(SwroceDevice& dev);
// A resolve_neighbour request back from group 0's owner: what waits on its address finishes now
// when it found the MAC or could not start, else when the outcome comes (control path).
void resolution_started(SwroceDevice& dev, const GroupRequest& request);

// ---- address handles (address_handle.cpp)

Status create_ah(Device& device, const rdma::driver::AhInit& init, const ControlToken& token,
                 void** out);
void destroy_ah(Device& device, void* ah);
// An AH's resolution ended: with the MAC it is ready, else it fails with `code` and `why`.
void address_handle_resolved(SwroceDevice& dev, SwroceAh& ah, const ControlToken& token,
                             std::optional<MacAddress> mac, StatusCode code,
                             const std::string& why);

// ---- memory (swroce_control.cpp)

void ask_for_quiescence(SwroceDevice& dev, QuiesceWait& wait);
Status deregister_mr(Device& device, const mem::MemoryRegion&, const ControlToken& token);

// ---- statistics and telemetry (statistics.cpp)

void stats(Device& device, std::vector<rdma::Counter>& out);
void qp_telemetry(Device& device, std::optional<std::uint32_t> only,
                  std::vector<rdma::QpStatus>& out);

} // namespace prdma::swroce
