// swroce on DPDK's vdev bus: --vdev=rdma_swroce0,port=<ethdev>,ip=<addr>[,mtu=,queues=,...] or
// rdma::create_device() with the same string creates a device; rte_dev_remove() removes it.
#include <map>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include <prdma/format.hpp>
#include <prdma/mem/dma_memory.hpp>

#include "engine.hpp"
#include "swroce_device.hpp"
#include "swroce_log.hpp"

PRDMA_LOG_REGISTER(prdma_logtype_swroce, prdma.swroce);

namespace prdma::swroce {

namespace {

rdma::DeviceAttr device_attributes(const SwroceDevice& dev) {
    rdma::DeviceAttr attr;
    // Linux rxe reports vendor 0xFFFFFF; a software HCA has no PCI identity of its own.
    attr.vendor_id = 0xffffff;
    attr.device_id = 0;
    attr.fw_version = 1;
    const MacAddress& mac = dev.port.mac();
    // EUI-64 from the MAC, as RoCE NICs derive their node GUID.
    attr.node_guid = (std::uint64_t{static_cast<std::uint8_t>(mac[0] ^ 0x02U)} << 56) |
                     (std::uint64_t{mac[1]} << 48) | (std::uint64_t{mac[2]} << 40) |
                     (std::uint64_t{0xfffe} << 24) | (std::uint64_t{mac[3]} << 16) |
                     (std::uint64_t{mac[4]} << 8) | mac[5];
    attr.system_image_guid = attr.node_guid;
    // Reads and atomics a QP has outstanding are only counted (rxe allows 128, and perftest sets a
    // QP's to what its peer accepts); those it accepts each hold a responder resource.
    attr.max_qp_rd_atomic = 128;
    attr.max_qp_init_rd_atomic = max_responder_resources;
    attr.capability_flags = rdma::cap_rc | rdma::cap_fast_reg | rdma::cap_reserved_lkey |
                            rdma::cap_atomic | rdma::cap_send_with_inv | rdma::cap_inline |
                            rdma::cap_pending_control | rdma::cap_software | rdma::cap_srq_resize |
                            rdma::cap_ud | rdma::cap_selective_repeat;
    attr.max_qp = dev.max_qp;
    attr.max_qp_wr = 16384;
    attr.max_sge = 16;
    attr.max_cq = 4096;
    attr.max_cqe = 1U << 20;
    attr.max_srq = max_srqs;
    attr.max_ah = max_ahs;
    attr.max_pd = 1U << 16;
    attr.max_inline_data = 256;
    attr.max_queue_groups = dev.port.queue_groups();
    return attr;
}

// Seed 004: the reserved L_Key is the key of the device's one DMA region, which the device takes at
// probe and holds for its whole life. get_dma_region() hands every consumer (every PD, every
// context) a reference to that same region, so its lkey is reserved_lkey for all of them and no
// consumer's deregister can free it or change it.
Status advertise_reserved_lkey(rdma::driver::Device& device) {
    auto dma = device.registry->get_dma_region(0);
    if (!dma) {
        return Error(dma.code(), "cannot reserve the DMA region's L_Key: " + dma.error().message());
    }
    device.config.attr.reserved_lkey = dma.value()->lkey();
    return {};
}

// vdev name -> device id, so remove finds what probe made.
std::map<std::string, rdma::DeviceId>& probed() {
    static std::map<std::string, rdma::DeviceId> devices;
    return devices;
}

template <class Resolver, class Config>
Status install(std::unique_ptr<Resolver>& slot, SwroceDevice& dev, Config config) {
    config.mac = dev.port.mac();
    config.tsc_hz = dev.tsc_hz;
    auto resolver = Resolver::create(config);
    if (!resolver) {
        return resolver.error();
    }
    slot = std::make_unique<Resolver>(std::move(resolver.value()));
    return {};
}

// The device's neighbour resolver: ARP for an IPv4 address, neighbour discovery for an IPv6 one;
// RTRs and address handles without the peer's MAC wait on it.
int make_resolver(SwroceDevice& dev, const char* name) {
    Status made;
    std::size_t max_pending = 0;
    if (dev.args.ip.is_v4) {
        ArpResolverConfig arp;
        arp.ip = dev.args.ip.ipv4_host_order();
        made = install(dev.arp, dev, arp);
        max_pending = arp.max_pending;
    } else {
        NdResolverConfig nd;
        nd.ip = dev.args.ip.bytes;
        made = install(dev.nd, dev, nd);
        max_pending = nd.max_pending;
    }
    if (made.ok() && dev.nd) {
        // Peers ask for our MAC at our solicited-node group, and advertise to all nodes.
        const std::array<MacAddress, 2> groups = {
            ipv6_multicast_mac(solicited_node_address(dev.nd->config().ip)),
            ipv6_multicast_mac(all_nodes_address)};
        (void)dev.port.accept_multicast(groups);
    }
    if (!made.ok()) {
        rdma::driver::report_probe_error(name, made.error());
        return -EINVAL;
    }
    dev.neighbour_outcomes = WorkRing<NeighbourOutcome>(static_cast<std::uint32_t>(max_pending) +
                                                        rte_ring_get_capacity(dev.control_done));
    return 0;
}

int probe(rte_device* dpdk_device, const char* name, const char* args) {
    auto parsed = parse_devargs(args);
    if (!parsed) {
        rdma::driver::report_probe_error(name, parsed.error());
        return -EINVAL;
    }
    if (parsed->service_progress) {
        if (Status lcores = check_service_lcores(name); !lcores.ok()) {
            rdma::driver::report_probe_error(name, lcores.error());
            return -EINVAL;
        }
    }
    auto dev = std::make_unique<SwroceDevice>();
    dev->name = name;
    dev->args = parsed.value();
    dev->max_qp = 1024;
    dev->tsc_hz = rte_get_tsc_hz();
    dev->timer_unit_cycles = dev->tsc_hz * 4096 / 1'000'000'000;
    // DPDK 22.11's pcapng describes the ports RTE_ETH_FOREACH_DEV lists when the file opens; a port
    // swroce has claimed is hidden from it, so the capture opens first.
    if (!dev->args.pcap.empty()) {
        if (Status capture = open_capture(*dev); !capture.ok()) {
            rdma::driver::report_probe_error(name, capture.error());
            return -EINVAL;
        }
    }
    // rte_socket_id() is SOCKET_ID_ANY (as unsigned) off an lcore, which the cast restores.
    auto port = SwrocePort::open(dev->args.port, dev->args.queues, dev->args.mtu,
                                 static_cast<int>(rte_socket_id()));
    if (!port) {
        rdma::driver::report_probe_error(name, port.error());
        return port.code() == StatusCode::busy ? -EBUSY : -EINVAL;
    }
    dev->port = std::move(port.value());
    dev->path_mtu = dev->args.mtu ? static_cast<rdma::Mtu>(std::countr_zero(*dev->args.mtu) - 7)
                                  : rdma::mtu_for_ethernet(dev->port.ethernet_mtu());
    if (const auto cap = dev->port.max_ib_mtu(); cap && rdma::mtu_bytes(dev->path_mtu) > *cap) {
        dev->path_mtu = rdma::mtu_for_ethernet(ethernet_mtu_for(*cap)); // its mbufs hold no more
    }
    dev->gid = gid_from_ip(dev->args.ip);
    // Each queue group gets an equal range of QPNs (see SwroceDevice::qps).
    dev->qps_per_group = dev->max_qp / dev->port.queue_groups();
    dev->max_qp = dev->qps_per_group * dev->port.queue_groups();
    dev->qps.resize(dev->max_qp);
    dev->qp_slot_taken.resize(dev->max_qp);
    dev->qp_slot_uses.resize(dev->max_qp);
    dev->qpn_slot_bits = static_cast<unsigned>(std::bit_width(dev->max_qp - 1));
    dev->qpn_slot_mask = (1U << dev->qpn_slot_bits) - 1;
    dev->qpn_uses = std::max(1U, (roce::qpn_mask + 1 - first_qpn) >> dev->qpn_slot_bits);
    // DPDK ring names are global and short: a per-process serial keeps them apart.
    static unsigned ring_serial = 0;
    const unsigned serial = ring_serial++;
    const auto make_ring = [&](const char* what, unsigned group, unsigned size,
                               unsigned flags) -> rte_ring* {
        const std::string ring = strformat("sw%s%u_%u", what, group, serial);
        rte_ring* made = rte_ring_create(ring.c_str(), size, dev->port.socket(), flags);
        if (made == nullptr) {
            rdma::driver::report_probe_error(
                name, Error(StatusCode::no_resources,
                            strformat("cannot create the %s ring of queue group %u: %s", what,
                                      group, rte_strerror(rte_errno))));
        }
        return made;
    };
    for (unsigned group = 0; group < dev->port.queue_groups(); ++group) {
        auto state = std::make_unique<QueueGroupState>();
        state->active.reserve(dev->qps_per_group);
        const std::uint64_t delay_cycles = dev->args.delay_us * rte_get_tsc_hz() / 1'000'000;
        state->rx_faults.configure(dev->args.rx_faults, dev->args.reorder_depth, delay_cycles,
                                   injector_seed(dev->args.seed, group, FaultDirection::rx));
        state->tx_faults.configure(dev->args.tx_faults, dev->args.reorder_depth, delay_cycles,
                                   injector_seed(dev->args.seed, group, FaultDirection::tx));
        // Any group may hand a frame to this one (multi-producer); only its owner takes (single).
        state->handover = make_ring("hov", group, 1024, RING_F_SC_DEQ);
        // Control requests: any control thread enqueues, the owner dequeues.
        state->control = make_ring("ctl", group, control_ring_size, RING_F_SC_DEQ);
        state->events = make_ring("evt", group, event_ring_size, 0);
        // Posts from threads that do not drive the group (a service or another thread's poller
        // does): any of them rings, the driver takes (each QP at most once, so room for every QP
        // of the group is enough).
        state->doorbell =
            make_ring("bell", group, rte_align32pow2(dev->qps_per_group + 1), RING_F_SC_DEQ);
        const bool made = state->handover != nullptr && state->control != nullptr &&
                          state->events != nullptr && state->doorbell != nullptr;
        dev->groups.push_back(std::move(state));
        if (!made) {
            return -ENOMEM;
        }
    }
    dev->unsent_destroys.resize(dev->groups.size());
    // Room for every request that can be out, so an owner never finds it full.
    dev->control_done =
        make_ring("done", 0, rte_align32pow2(control_ring_size * dev->port.queue_groups()), 0);
    if (dev->control_done == nullptr) {
        return -ENOMEM;
    }
    // Events report changes from here on: a context opened later sees the state in query_port.
    dev->link_was_up = dev->port.link_up();
    if (const int failed = make_resolver(*dev, name); failed != 0) {
        return failed;
    }

    rdma::driver::DeviceConfig config;
    config.name = name;
    config.dpdk_device = dpdk_device;
    config.ops = &swroce_ops;
    config.fast_path = {swroce_post_send,  swroce_post_recv, swroce_poll_cq, nullptr,
                        swroce_post_error, swroce_progress,  swroce_arm_cq,  swroce_post_srq_recv};
    config.attr = device_attributes(*dev);
    config.port_count = 1;
    config.registry = mem::dpdk_registry_config();
    config.registry.max_keys = 1U << 16;
    config.driver_private = dev.get();
    auto id = rdma::driver::register_device(std::move(config));
    if (!id) {
        rdma::driver::report_probe_error(name, id.error());
        return -ENOSPC;
    }
    dev->id = id.value();
    dev->registry = rdma::driver::device(dev->id)->registry.get();
    if (Status reserved = advertise_reserved_lkey(*rdma::driver::device(dev->id)); !reserved.ok()) {
        rdma::driver::report_probe_error(name, reserved.error());
        (void)rdma::driver::unregister_device(dev->id); // closes (and frees) `dev`
        (void)dev.release();
        return -ENOMEM;
    }
    if (dev->args.service_progress) {
        if (Status started = start_progress_service(*dev); !started.ok()) {
            rdma::driver::report_probe_error(name, started.error());
            (void)rdma::driver::unregister_device(dev->id); // closes (and frees) `dev`
            (void)dev.release();
            return -EINVAL;
        }
    }
    SWROCE_LOG(INFO, "%s: rdma device %u on %s, ip %s, path MTU %u, %u queue group(s)", name,
               static_cast<unsigned>(dev->id), dev->port.name().c_str(),
               dev->args.ip.to_string().c_str(), rdma::mtu_bytes(dev->path_mtu),
               dev->port.queue_groups());
    probed()[name] = dev->id;
    (void)dev.release(); // owned by the class's device now; freed in DeviceOps::close
    return 0;
}

int remove(rte_device*, const char* name) {
    auto it = probed().find(name);
    if (it == probed().end()) {
        return -ENODEV;
    }
    const rdma::DeviceId id = it->second;
    probed().erase(it);
    const Status status = rdma::driver::unregister_device(id);
    return status.ok() ? 0 : -ENODEV;
}

// Before main(), so EAL's --vdev parsing finds the driver name.
[[gnu::constructor]] void register_swroce() {
    rdma::driver::register_vdev_driver("rdma_swroce", probe, remove);
}

} // namespace

} // namespace prdma::swroce
