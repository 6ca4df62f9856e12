// Context: a client's view of a device (seed 003 OpenCa/CloseCa), attribute queries with
// versioned self-relative blocks (QueryCa/QueryPort), control completions and events.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <prdma/format.hpp>

#include "objects.hpp"
#include "rdmadev_log.hpp"

namespace prdma::rdma {

using detail::ContextState;

namespace {

std::size_t align8(std::size_t n) {
    return (n + 7) & ~std::size_t{7};
}

// One port's block: PortAttr, then its GID table, then its P_Key table (8-byte aligned).
Result<std::vector<std::uint8_t>> encode_port(driver::Device& dev, std::uint8_t port) {
    driver::PortInfo info;
    if (Status status = dev.config.ops->query_port(dev, port, info); !status.ok()) {
        return status.error();
    }
    PortAttr attr;
    attr.port_num = port;
    attr.state = info.state;
    attr.max_mtu = info.max_mtu;
    attr.active_mtu = info.active_mtu;
    attr.link_speed_mbps = info.link_speed_mbps;
    attr.link_width = info.link_width;
    attr.max_msg_size = info.max_msg_size;
    attr.gid_count = static_cast<std::uint16_t>(info.gids.size());
    attr.pkey_count = static_cast<std::uint16_t>(info.pkeys.size());
    std::memcpy(attr.mac, info.mac, sizeof(attr.mac));
    attr.gid_table_offset = static_cast<std::uint32_t>(align8(sizeof(PortAttr)));
    attr.pkey_table_offset =
        static_cast<std::uint32_t>(attr.gid_table_offset + info.gids.size() * sizeof(Gid));
    attr.size = static_cast<std::uint32_t>(
        align8(attr.pkey_table_offset + info.pkeys.size() * sizeof(std::uint16_t)));
    std::vector<std::uint8_t> block(attr.size, 0);
    std::memcpy(block.data(), &attr, sizeof(attr));
    for (std::size_t i = 0; i < info.gids.size(); ++i) {
        std::memcpy(block.data() + attr.gid_table_offset + i * sizeof(Gid), info.gids[i].raw.data(),
                    sizeof(Gid));
    }
    std::memcpy(block.data() + attr.pkey_table_offset, info.pkeys.data(),
                info.pkeys.size() * sizeof(std::uint16_t));
    return block;
}

// Seed 003's buffer rules, shared by both queries; `blob` starts with {version, size}.
Status copy_attributes(const std::vector<std::uint8_t>& blob, void* buffer, std::uint32_t* size) {
    const auto required = static_cast<std::uint32_t>(blob.size());
    if (*size < sizeof(AttrHeader)) {
        *size = required;
        return Error(StatusCode::buffer_too_small,
                     strformat("the buffer must hold at least the %zu-byte header; the whole "
                               "answer needs %u bytes",
                               sizeof(AttrHeader), required));
    }
    if (buffer == nullptr) {
        return Error(StatusCode::invalid_parameter, "no output buffer");
    }
    if (*size < required) {
        // A prefix, with the header's size field telling what the whole answer needs.
        std::memcpy(buffer, blob.data(), *size);
        return Error(
            StatusCode::buffer_overflow,
            strformat("returned %u of %u bytes; ask again with %u", *size, required, required));
    }
    std::memcpy(buffer, blob.data(), required);
    *size = required;
    return {};
}

Status check_query_args(const std::uint32_t* size, std::uint32_t version) {
    if (size == nullptr) {
        return Error(StatusCode::invalid_parameter, "no size given");
    }
    if (version != attr_version_1) {
        return Error(StatusCode::invalid_parameter,
                     strformat("attribute version %u is unknown; this library speaks version %u",
                               version, attr_version_current));
    }
    return {};
}

} // namespace

Context::Context(std::shared_ptr<ContextState> state) : state_(std::move(state)) {}
Context::Context(Context&& other) noexcept = default;
Context& Context::operator=(Context&& other) noexcept = default;
Context::~Context() = default;

Result<Context> Context::open(DeviceId device) {
    driver::Device* dev = driver::device(device);
    if (dev == nullptr) {
        return Error(StatusCode::invalid_parameter,
                     strformat("no rdma device %u", static_cast<unsigned>(device)));
    }
    if (dev->removed) {
        return detail::device_removed_error(device);
    }
    // What the device saw before this client came (a link that came up while it started) is
    // raised first, so the client hears only of what changes from now on, as a verbs context.
    dev->config.ops->control_progress(*dev);
    auto state = std::make_shared<ContextState>();
    state->device = device;
    state->id = detail::attach_context(device, state.get());
    return Context(std::move(state));
}

Status Context::close() {
    if (!state_) {
        return detail::context_closed_error();
    }
    const Resources& held = state_->resources;
    if (held.total() > 0) {
        return Error(StatusCode::busy,
                     strformat("the client still holds %u PDs, %u CQs, %u QPs, %u SRQs, %u "
                               "address handles and %u MRs; release them first",
                               held.pds, held.cqs, held.qps, held.srqs, held.ahs, held.mrs));
    }
    state_.reset();
    return {};
}

DeviceId Context::device() const {
    return state_ ? state_->device : invalid_device;
}

Context::Resources Context::resources() const {
    return state_ ? state_->resources : Resources{};
}

Status Context::query_device(void* buffer, std::uint32_t* size, std::uint32_t version) const {
    if (!state_) {
        return detail::context_closed_error();
    }
    if (Status args = check_query_args(size, version); !args.ok()) {
        return args;
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return detail::device_removed_error(state_->device);
    }
    DeviceAttr attr = detail::device_attr(*dev);
    attr.port_attr_offset = static_cast<std::uint32_t>(align8(sizeof(DeviceAttr)));

    std::vector<std::uint8_t> blob(attr.port_attr_offset, 0);
    std::vector<std::size_t> port_starts;
    for (std::uint8_t port = 1; port <= attr.port_count; ++port) {
        auto block = encode_port(*dev, port);
        if (!block) {
            return block.error();
        }
        port_starts.push_back(blob.size());
        blob.insert(blob.end(), block->begin(), block->end());
    }
    // Chain the port blocks by offsets relative to each block.
    for (std::size_t i = 0; i + 1 < port_starts.size(); ++i) {
        const auto next = static_cast<std::uint32_t>(port_starts[i + 1] - port_starts[i]);
        std::memcpy(blob.data() + port_starts[i] + offsetof(PortAttr, next_port_offset), &next,
                    sizeof(next));
    }
    attr.size = static_cast<std::uint32_t>(blob.size());
    std::memcpy(blob.data(), &attr, sizeof(attr));
    return copy_attributes(blob, buffer, size);
}

Result<PortInfo> wait_port_active(const Context& context, std::uint8_t port,
                                  std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        auto info = context.device_info();
        if (!info) {
            return info.error();
        }
        if (port == 0 || port > info->ports.size()) {
            return Error(StatusCode::invalid_parameter,
                         strformat("port %u: the device has ports 1..%zu", unsigned{port},
                                   info->ports.size()));
        }
        PortInfo& found = info->ports[port - 1U];
        if (found.attr.state == PortState::active) {
            return std::move(found);
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return Error(StatusCode::not_connected,
                         strformat("port %u of device %u did not come up within %lld ms (is the "
                                   "other end of its link running?)",
                                   unsigned{port}, static_cast<unsigned>(context.device()),
                                   static_cast<long long>(limit.count())));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

Result<DeviceInfo> Context::device_info() const {
    std::uint32_t size = 0;
    if (Status sized = query_device(nullptr, &size); sized.code() != StatusCode::buffer_too_small) {
        return sized.ok() ? Error(StatusCode::internal, "query_device sized nothing")
                          : sized.error();
    }
    std::vector<std::uint64_t> blob((size + 7) / 8); // 8-byte aligned, as the blocks are
    if (Status queried = query_device(blob.data(), &size); !queried.ok()) {
        return queried.error(); // the device went away in between
    }
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(blob.data());
    DeviceInfo info;
    std::memcpy(&info.attr, bytes, sizeof(info.attr));
    const auto* block = attr_at<std::uint8_t>(bytes, info.attr.port_attr_offset);
    for (std::uint8_t n = 0; n < info.attr.port_count; ++n) {
        PortInfo& port = info.ports.emplace_back();
        std::memcpy(&port.attr, block, sizeof(port.attr));
        const auto* gids = attr_at<Gid>(block, port.attr.gid_table_offset);
        port.gids.assign(gids, gids + port.attr.gid_count);
        const auto* pkeys = attr_at<std::uint16_t>(block, port.attr.pkey_table_offset);
        port.pkeys.assign(pkeys, pkeys + port.attr.pkey_count);
        block = attr_at<std::uint8_t>(block, port.attr.next_port_offset);
    }
    return info;
}

Status Context::query_port(std::uint8_t port, void* buffer, std::uint32_t* size,
                           std::uint32_t version) const {
    if (!state_) {
        return detail::context_closed_error();
    }
    if (Status args = check_query_args(size, version); !args.ok()) {
        return args;
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return detail::device_removed_error(state_->device);
    }
    if (port == 0 || port > dev->config.port_count) {
        return Error(StatusCode::invalid_parameter,
                     strformat("port %u does not exist; ports are numbered 1 to %u", port,
                               dev->config.port_count));
    }
    auto block = encode_port(*dev, port);
    if (!block) {
        return block.error();
    }
    return copy_attributes(block.value(), buffer, size);
}

std::size_t Context::poll_control(std::span<ControlCompletion> out) {
    if (!state_) {
        return 0;
    }
    if (driver::Device* dev = detail::live_device(*state_); dev != nullptr) {
        dev->config.ops->control_progress(*dev);
    }
    std::size_t n = 0;
    while (n < out.size() && !state_->completions.empty()) {
        out[n++] = std::move(state_->completions.front());
        state_->completions.pop_front();
    }
    return n;
}

Result<std::vector<Counter>> Context::query_stats() const {
    if (!state_) {
        return detail::context_closed_error();
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return detail::device_removed_error(state_->device);
    }
    std::vector<Counter> counters;
    dev->config.ops->stats(*dev, counters);
    return counters;
}

std::size_t Context::poll_events(std::span<Event> out) {
    if (!state_) {
        return 0;
    }
    // Events the data path recorded reach the class from the driver's control progress.
    if (driver::Device* dev = detail::live_device(*state_); dev != nullptr) {
        dev->config.ops->control_progress(*dev);
    }
    std::size_t n = 0;
    while (n < out.size() && !state_->events.empty()) {
        out[n++] = state_->events.front();
        state_->events.pop_front();
    }
    return n;
}

namespace detail {

DeviceAttr device_attr(const driver::Device& dev) {
    DeviceAttr attr = dev.config.attr;
    attr.version = attr_version_current;
    attr.port_count = dev.config.port_count;
    attr.page_size_support = dev.config.registry.page_sizes;
    attr.max_fast_reg_pages = dev.config.registry.max_fast_reg_pages;
    // Key 0 is never handed out, and a device with a reserved L_Key holds the DMA region's key
    // for its whole life (get_dma_region shares it rather than taking another).
    attr.max_mr = dev.config.registry.max_keys - 1 - (attr.reserved_lkey != 0 ? 1U : 0U);
    attr.max_mr_size = dev.config.registry.max_region_bytes;
    return attr;
}

Error context_closed_error() {
    return {StatusCode::invalid_parameter,
            "the context is closed (or was moved from); open another with Context::open"};
}

void fail_pending_requests(ContextState& context) {
    // Finishing may free the last object holding the context.
    const std::shared_ptr<ContextState> keep = context.shared_from_this();
    while (!context.pending.empty()) {
        const driver::ControlToken token = context.pending.begin()->second.token;
        finish_request(context, token, StatusCode::device_removed);
        context.completions.push_back(
            ControlCompletion{token.request_id, token.op, StatusCode::device_removed, token.qpn,
                              strformat("device %u was removed before the request finished",
                                        static_cast<unsigned>(context.device))});
    }
}

} // namespace detail

namespace driver {

void complete_control(Device& device, const ControlToken& token, StatusCode status,
                      std::string message) {
    ContextState* context = detail::find_context(device.id, token.context);
    if (context == nullptr) {
        RDMADEV_LOG(WARNING, "completion for a closed context %u dropped", token.context);
        return;
    }
    // Finishing may free the last object holding the context (a dropped handle's destroy).
    const std::shared_ptr<ContextState> keep = context->shared_from_this();
    detail::finish_request(*context, token, status);
    context->completions.push_back(
        ControlCompletion{token.request_id, token.op, status, token.qpn, std::move(message)});
}

} // namespace driver

} // namespace prdma::rdma
