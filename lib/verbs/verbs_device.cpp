// Devices, contexts and their attributes: what ibv_devices and ibv_devinfo -v ask, and what every
// verbs program asks before it allocates anything.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <endian.h>

#include <prdma/format.hpp>

#include "verbs_shim.hpp"

// ibv_query_port is a macro over the inline form; the exported entry is defined below.
#undef ibv_query_port

namespace prdma::verbs {
namespace {

Result<rdma::DeviceInfo> info_of(ibv_context* context) {
    ShimContext& shim = shim_context(context);
    const std::lock_guard lock(shim.control_mutex());
    return shim.context.device_info();
}

unsigned device_cap_flags(const rdma::DeviceAttr& attr) {
    unsigned flags = IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN;
    if (attr.capability_flags.has(rdma::cap_port_active_event)) {
        flags |= IBV_DEVICE_PORT_ACTIVE_EVENT;
    }
    if (attr.capability_flags.has(rdma::cap_fast_reg)) {
        flags |= IBV_DEVICE_MEM_MGT_EXTENSIONS;
    }
    if (attr.capability_flags.has(rdma::cap_srq_resize)) {
        flags |= IBV_DEVICE_SRQ_RESIZE;
    }
    return flags;
}

void fill_device_attr(const rdma::DeviceAttr& attr, ibv_device_attr& out) {
    out = {};
    std::snprintf(out.fw_ver, sizeof(out.fw_ver), "%u.%u.%u", attr.fw_version >> 16,
                  (attr.fw_version >> 8) & 0xffU, attr.fw_version & 0xffU);
    out.node_guid = htobe64(attr.node_guid);
    out.sys_image_guid = htobe64(attr.system_image_guid);
    out.max_mr_size = attr.max_mr_size;
    out.page_size_cap = attr.page_size_support;
    out.vendor_id = attr.vendor_id;
    out.vendor_part_id = attr.device_id;
    out.hw_ver = attr.device_rev;
    out.max_qp = static_cast<int>(attr.max_qp);
    out.max_qp_wr = static_cast<int>(attr.max_qp_wr);
    out.device_cap_flags = device_cap_flags(attr);
    out.max_sge = static_cast<int>(attr.max_sge);
    out.max_sge_rd = static_cast<int>(attr.max_sge);
    out.max_cq = static_cast<int>(attr.max_cq);
    out.max_cqe = static_cast<int>(attr.max_cqe);
    out.max_mr = static_cast<int>(attr.max_mr);
    out.max_pd = static_cast<int>(attr.max_pd);
    out.max_srq = static_cast<int>(attr.max_srq);
    out.max_ah = static_cast<int>(attr.max_ah);
    out.max_srq_wr = attr.max_srq != 0 ? static_cast<int>(attr.max_qp_wr) : 0; // attributes.hpp
    out.max_srq_sge = attr.max_srq != 0 ? static_cast<int>(attr.max_sge) : 0;
    // verbs' max_qp_rd_atom is what a QP accepts as a responder (max_dest_rd_atomic) and
    // max_qp_init_rd_atom what it may have outstanding (max_rd_atomic): prdma names them the
    // other way round (attributes.hpp).
    out.max_qp_rd_atom = attr.max_qp_init_rd_atomic;
    out.max_res_rd_atom = static_cast<int>(attr.max_qp_init_rd_atomic * attr.max_qp);
    out.max_qp_init_rd_atom = attr.max_qp_rd_atomic;
    out.atomic_cap = attr.capability_flags.has(rdma::cap_atomic) ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
    out.max_pkeys = 1;
    out.local_ca_ack_delay = 15;
    out.phys_port_cnt = attr.port_count;
}

ibv_port_state port_state(rdma::PortState state) {
    switch (state) {
    case rdma::PortState::active:
        return IBV_PORT_ACTIVE;
    case rdma::PortState::armed:
        return IBV_PORT_ARMED;
    case rdma::PortState::init:
        return IBV_PORT_INIT;
    case rdma::PortState::down:
        return IBV_PORT_DOWN;
    case rdma::PortState::nop:
        break;
    }
    return IBV_PORT_NOP;
}

void fill_port_attr(const rdma::PortInfo& port, ibv_port_attr& out) {
    const rdma::PortAttr& attr = port.attr;
    out.state = port_state(attr.state);
    out.max_mtu = static_cast<ibv_mtu>(attr.max_mtu);
    out.active_mtu = static_cast<ibv_mtu>(attr.active_mtu);
    out.gid_tbl_len = static_cast<int>(port.gids.size());
    out.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
    out.max_msg_sz = static_cast<std::uint32_t>(attr.max_msg_size);
    out.pkey_tbl_len = static_cast<std::uint16_t>(port.pkeys.size());
    out.max_vl_num = 1;
    out.active_width = attr.link_width;
    out.active_speed = 1; // SDR: the code for a software link of no fixed rate
    out.phys_state = attr.state == rdma::PortState::active ? 5 : 3; // LinkUp : Disabled
    out.link_layer = IBV_LINK_LAYER_ETHERNET;
}

// ibv_context_ops' and verbs_context's query entries.
int query_port_op(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr,
                  std::size_t attr_size) {
    Result<rdma::DeviceInfo> info = info_of(context);
    if (!info.ok()) {
        refuse("ibv_query_port", EIO, info.error().message());
        return EIO;
    }
    const std::vector<rdma::PortInfo>& ports = info.value().ports;
    if (port_num == 0 || port_num > ports.size() || attr == nullptr) {
        return EINVAL;
    }
    ibv_port_attr full{};
    fill_port_attr(ports[port_num - 1U], full);
    std::memcpy(attr, &full, std::min(attr_size, sizeof(full)));
    return 0;
}

int query_device_ex_op(ibv_context* context, const ibv_query_device_ex_input* input,
                       ibv_device_attr_ex* attr, std::size_t attr_size) {
    if ((input != nullptr && input->comp_mask != 0) || attr == nullptr ||
        attr_size < sizeof(attr->orig_attr)) {
        return EINVAL;
    }
    Result<rdma::DeviceInfo> info = info_of(context);
    if (!info.ok()) {
        refuse("ibv_query_device_ex", EIO, info.error().message());
        return EIO;
    }
    ibv_device_attr_ex full{};
    fill_device_attr(info.value().attr, full.orig_attr);
    full.phys_port_cnt_ex = info.value().attr.port_count;
    std::memcpy(attr, &full, std::min(attr_size, sizeof(full)));
    return 0;
}

} // namespace

int query_gid_entry(ibv_context* context, std::uint32_t port_num, std::uint32_t index,
                    ibv_gid_entry& out) {
    Result<rdma::DeviceInfo> info = info_of(context);
    if (!info.ok()) {
        return EIO;
    }
    const std::vector<rdma::PortInfo>& ports = info.value().ports;
    if (port_num == 0 || port_num > ports.size() || index >= ports[port_num - 1].gids.size()) {
        return EINVAL;
    }
    const rdma::Gid& gid = ports[port_num - 1].gids[index];
    out = {};
    std::memcpy(out.gid.raw, gid.raw.data(), sizeof(out.gid.raw));
    out.gid_index = index;
    out.port_num = port_num;
    out.gid_type = IBV_GID_TYPE_ROCE_V2;
    return 0;
}

void set_context_query_ops(ShimContext& shim) {
    shim.vctx.query_port = query_port_op;
    shim.vctx.query_device_ex = query_device_ex_op;
}

} // namespace prdma::verbs

using prdma::verbs::shim_state;
using prdma::verbs::ShimContext;
using prdma::verbs::ShimDevice;

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
    prdma::verbs::ShimState& state = shim_state();
    if (!state.error.empty()) {
        static std::once_flag said;
        std::call_once(said,
                       [&] { std::fprintf(stderr, "libprdma-verbs: %s\n", state.error.c_str()); });
    }
    // The caller frees it with ibv_free_device_list, as libibverbs' own: a C allocation.
    using DevicePointer = ibv_device*;
    auto* list = static_cast<DevicePointer*>(
        std::calloc(state.devices.size() + 1, sizeof(DevicePointer))); // NOLINT: pointers it holds
    if (list == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    for (std::size_t i = 0; i < state.devices.size(); ++i) {
        list[i] = &state.devices[i]->device;
    }
    if (num_devices != nullptr) {
        *num_devices = static_cast<int>(state.devices.size());
    }
    return list;
}

void ibv_free_device_list(ibv_device** list) {
    std::free(static_cast<void*>(list));
}

const char* ibv_get_device_name(ibv_device* device) {
    return device != nullptr ? device->name : nullptr;
}

__be64 ibv_get_device_guid(ibv_device* device) {
    // Every ibv_device the shim hands out is the first member of a ShimDevice.
    return device != nullptr ? reinterpret_cast<ShimDevice*>(device)->node_guid : 0; // NOLINT
}

ibv_context* ibv_open_device(ibv_device* device) {
    if (device == nullptr) {
        errno = EINVAL;
        return nullptr;
    }
    auto* shim_device = reinterpret_cast<ShimDevice*>(device); // NOLINT: see ibv_get_device_guid
    std::unique_lock lock(shim_device->control_mutex); // the open runs the device's control path
    prdma::Result<prdma::rdma::Context> context = prdma::rdma::Context::open(shim_device->id);
    lock.unlock();
    if (!context.ok()) {
        prdma::verbs::refuse("ibv_open_device", EIO, context.error().message());
        return nullptr;
    }
    auto shim = std::make_unique<ShimContext>(std::move(context.value()));
    shim->device = shim_device;
    verbs_context& vctx = shim->vctx;
    pthread_mutex_init(&vctx.context.mutex, nullptr);
    vctx.sz = sizeof(verbs_context);
    vctx.context.device = device;
    vctx.context.cmd_fd = -1;
    vctx.context.async_fd = -1;
    vctx.context.num_comp_vectors = 1;
    vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
    if (const prdma::Status started = prdma::verbs::start_async_events(*shim); !started.ok()) {
        prdma::verbs::refuse("ibv_open_device", ENOMEM, started.error().message());
        return nullptr;
    }
    prdma::verbs::set_context_query_ops(*shim);
    prdma::verbs::set_context_ops(*shim);
    return &shim.release()->vctx.context; // owned by the caller until ibv_close_device
}

int ibv_close_device(ibv_context* context) {
    if (context == nullptr) {
        return EINVAL;
    }
    // As verbs, the close succeeds with objects left; they are destroyed later, so the context
    // lasts until the last of them is (close_context).
    prdma::verbs::close_context(prdma::verbs::shim_context(context));
    return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
    if (attr == nullptr) {
        return EINVAL;
    }
    ibv_device_attr_ex full{};
    const int status = prdma::verbs::shim_context(context).vctx.query_device_ex(
        context, nullptr, &full, sizeof(full));
    if (status == 0) {
        *attr = full.orig_attr;
    }
    return status;
}

// The entry point of binaries built against the old inline-less ibv_query_port.
int ibv_query_port(ibv_context* context, std::uint8_t port_num, _compat_ibv_port_attr* attr) {
    return prdma::verbs::shim_context(context).vctx.query_port(
        context, port_num, reinterpret_cast<ibv_port_attr*>(attr), sizeof(ibv_port_attr)); // NOLINT
}

int ibv_query_gid(ibv_context* context, std::uint8_t port_num, int index, ibv_gid* gid) {
    ibv_gid_entry entry{};
    if (index < 0 || gid == nullptr) {
        return -1;
    }
    if (prdma::verbs::query_gid_entry(context, port_num, static_cast<std::uint32_t>(index),
                                      entry) != 0) {
        return -1;
    }
    *gid = entry.gid;
    return 0;
}

int ibv_query_gid_type(ibv_context* context, std::uint8_t port_num, unsigned int index, int* type) {
    ibv_gid_entry entry{};
    if (type == nullptr || prdma::verbs::query_gid_entry(context, port_num, index, entry) != 0) {
        return -1;
    }
    *type = prdma::verbs::gid_type_sysfs_roce_v2;
    return 0;
}

int _ibv_query_gid_ex(ibv_context* context, std::uint32_t port_num, std::uint32_t gid_index,
                      ibv_gid_entry* entry, std::uint32_t flags, std::size_t entry_size) {
    if (entry == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) {
        return EINVAL;
    }
    return prdma::verbs::query_gid_entry(context, port_num, gid_index, *entry);
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, std::size_t max_entries,
                             std::uint32_t flags, std::size_t entry_size) {
    if (entries == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) {
        return -EINVAL;
    }
    std::size_t n = 0;
    for (std::uint32_t port = 1; n < max_entries; ++port) {
        ibv_gid_entry first{};
        if (prdma::verbs::query_gid_entry(context, port, 0, first) != 0) {
            break; // past the last port
        }
        for (std::uint32_t index = 0; n < max_entries; ++index) {
            if (prdma::verbs::query_gid_entry(context, port, index, entries[n]) != 0) {
                break;
            }
            ++n;
        }
    }
    return static_cast<ssize_t>(n);
}

int ibv_query_pkey(ibv_context* context, std::uint8_t port_num, int index, __be16* pkey) {
    ibv_port_attr attr{};
    if (pkey == nullptr || index != 0 ||
        prdma::verbs::shim_context(context).vctx.query_port(context, port_num, &attr,
                                                            sizeof(attr)) != 0) {
        return -1;
    }
    *pkey = htobe16(0xffff); // the default partition, full membership: RoCE has no other
    return 0;
}

} // extern "C"
