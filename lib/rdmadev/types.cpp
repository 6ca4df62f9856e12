#include <prdma/format.hpp>
#include <prdma/rdmadev/types.hpp>
#include <prdma/rdmadev/work_request.hpp>

namespace prdma::rdma {

Gid Gid::from_ipv4(std::uint32_t address_host_order) {
    Gid gid;
    gid.raw[10] = 0xff;
    gid.raw[11] = 0xff;
    gid.raw[12] = static_cast<std::uint8_t>(address_host_order >> 24);
    gid.raw[13] = static_cast<std::uint8_t>(address_host_order >> 16);
    gid.raw[14] = static_cast<std::uint8_t>(address_host_order >> 8);
    gid.raw[15] = static_cast<std::uint8_t>(address_host_order);
    return gid;
}

bool Gid::is_ipv4_mapped() const {
    for (int i = 0; i < 10; ++i) {
        if (raw[static_cast<std::size_t>(i)] != 0) {
            return false;
        }
    }
    return raw[10] == 0xff && raw[11] == 0xff;
}

std::uint32_t Gid::ipv4_host_order() const {
    return (std::uint32_t{raw[12]} << 24) | (std::uint32_t{raw[13]} << 16) |
           (std::uint32_t{raw[14]} << 8) | std::uint32_t{raw[15]};
}

Mtu mtu_for_ethernet(unsigned ethernet_mtu) {
    // IPv6 (40) + UDP (8) + BTH (12) + RETH (16) + ImmDt (4) + ICRC (4): the worst-case RoCEv2
    // overhead inside the Ethernet payload (a full RDMA WRITE with immediate).
    constexpr unsigned overhead = 40 + 8 + 12 + 16 + 4 + 4;
    for (Mtu mtu : {Mtu::mtu_4096, Mtu::mtu_2048, Mtu::mtu_1024, Mtu::mtu_512}) {
        if (mtu_bytes(mtu) + overhead <= ethernet_mtu) {
            return mtu;
        }
    }
    return Mtu::mtu_256;
}

std::string guid_string(std::uint64_t guid) {
    return strformat("%04x:%04x:%04x:%04x", static_cast<unsigned>(guid >> 48) & 0xffffU,
                     static_cast<unsigned>(guid >> 32) & 0xffffU,
                     static_cast<unsigned>(guid >> 16) & 0xffffU,
                     static_cast<unsigned>(guid) & 0xffffU);
}

std::string_view qp_state_name(QpState state) {
    switch (state) {
    case QpState::reset:
        return "RESET";
    case QpState::init:
        return "INIT";
    case QpState::rtr:
        return "RTR";
    case QpState::rts:
        return "RTS";
    case QpState::sqd:
        return "SQD";
    case QpState::sqe:
        return "SQE";
    case QpState::err:
        return "ERR";
    }
    return "unknown";
}

std::string_view qp_type_name(QpType type) {
    switch (type) {
    case QpType::rc:
        return "RC";
    case QpType::ud:
        return "UD";
    }
    return "unknown";
}

std::string_view control_op_name(ControlOp op) {
    switch (op) {
    case ControlOp::open_context:
        return "open_context";
    case ControlOp::close_context:
        return "close_context";
    case ControlOp::create_qp:
        return "create_qp";
    case ControlOp::modify_qp:
        return "modify_qp";
    case ControlOp::destroy_qp:
        return "destroy_qp";
    case ControlOp::destroy_cq:
        return "destroy_cq";
    case ControlOp::register_mr:
        return "register_mr";
    case ControlOp::create_cq:
        return "create_cq";
    case ControlOp::deregister_mr:
        return "deregister_mr";
    case ControlOp::create_ah:
        return "create_ah";
    }
    return "unknown";
}

std::string_view event_type_name(EventType type) {
    switch (type) {
    case EventType::port_active:
        return "port_active";
    case EventType::port_error:
        return "port_error";
    case EventType::qp_fatal:
        return "qp_fatal";
    case EventType::qp_last_wqe_reached:
        return "qp_last_wqe_reached";
    case EventType::cq_error:
        return "cq_error";
    case EventType::device_removed:
        return "device_removed";
    case EventType::srq_limit_reached:
        return "srq_limit_reached";
    }
    return "unknown";
}

std::string_view wr_opcode_name(WrOpcode opcode) {
    switch (opcode) {
    case WrOpcode::send:
        return "send";
    case WrOpcode::send_with_imm:
        return "send_with_imm";
    case WrOpcode::send_with_inv:
        return "send_with_inv";
    case WrOpcode::rdma_write:
        return "rdma_write";
    case WrOpcode::rdma_write_with_imm:
        return "rdma_write_with_imm";
    case WrOpcode::rdma_read:
        return "rdma_read";
    case WrOpcode::atomic_cmp_swap:
        return "atomic_cmp_swap";
    case WrOpcode::atomic_fetch_add:
        return "atomic_fetch_add";
    case WrOpcode::fast_reg:
        return "fast_reg";
    case WrOpcode::local_inv:
        return "local_inv";
    }
    return "unknown";
}

std::string_view wc_status_name(WcStatus status) {
    switch (status) {
    case WcStatus::success:
        return "success";
    case WcStatus::local_length_error:
        return "local_length_error";
    case WcStatus::local_qp_operation_error:
        return "local_qp_operation_error";
    case WcStatus::local_protection_error:
        return "local_protection_error";
    case WcStatus::wr_flush_error:
        return "wr_flush_error";
    case WcStatus::bad_response_error:
        return "bad_response_error";
    case WcStatus::local_access_error:
        return "local_access_error";
    case WcStatus::remote_invalid_request_error:
        return "remote_invalid_request_error";
    case WcStatus::remote_access_error:
        return "remote_access_error";
    case WcStatus::remote_operation_error:
        return "remote_operation_error";
    case WcStatus::retry_exceeded:
        return "retry_exceeded";
    case WcStatus::rnr_retry_exceeded:
        return "rnr_retry_exceeded";
    case WcStatus::fatal_error:
        return "fatal_error";
    case WcStatus::general_error:
        return "general_error";
    }
    return "unknown";
}

} // namespace prdma::rdma
