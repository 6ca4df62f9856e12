// Memory regions the user asks for: `register mr`, and fast-register / invalidate of one through a
// QP's send queue. The WR is posted by the lcore that owns the QP (the main lcore never posts):
// it goes through that lcore's mailbox and the main lcore waits for its completion.
#include <cstdio>
#include <thread>

#include <prdma/format.hpp>
#include <prdma/mem/key.hpp>

#include "session.hpp"

namespace prdma::testpmd {

namespace {

constexpr std::size_t page_bytes = 4096;

Result<mem::AccessFlags> parse_access(std::string_view text) {
    mem::AccessFlags access = mem::access_local_write;
    while (!text.empty()) {
        const std::size_t comma = text.find(',');
        const std::string_view word = text.substr(0, comma);
        if (word == "lw" || word == "local_write") {
            access |= mem::access_local_write;
        } else if (word == "rw" || word == "remote_write") {
            access |= mem::access_remote_write;
        } else if (word == "rr" || word == "remote_read") {
            access |= mem::access_remote_read;
        } else if (word == "ra" || word == "remote_atomic") {
            access |= mem::access_remote_atomic;
        } else {
            return Error(StatusCode::invalid_parameter,
                         strformat("access '%.*s': a comma list of lw, rw, rr, ra "
                                   "(local_write, remote_write, remote_read, remote_atomic)",
                                   static_cast<int>(word.size()), word.data()));
        }
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    }
    return access;
}

} // namespace

Status Session::register_mr(std::uint64_t size, std::string_view access_text) {
    if (size == 0 || size > (1ULL << 30)) {
        return Error(StatusCode::invalid_parameter,
                     strformat("register mr %llu: the size must be in [1, 1 GiB]",
                               static_cast<unsigned long long>(size)));
    }
    Result<mem::AccessFlags> access =
        parse_access(access_text.empty() ? std::string_view("lw,rw,rr") : access_text);
    if (!access) {
        return access.error();
    }
    const std::size_t rounded = (size + page_bytes - 1) / page_bytes * page_bytes;
    Result<mem::DmaBuffer> buffer = mem::DmaBuffer::allocate(rounded, page_bytes);
    if (!buffer) {
        return buffer.error();
    }
    Result<rdma::MemoryRegionHandle> mr =
        pd_.register_memory(buffer->data(), static_cast<std::size_t>(size), *access);
    if (!mr) {
        return mr.error();
    }
    mrs_.push_back(UserMr{.buffer = std::move(buffer.value()),
                          .mr = std::move(mr.value()),
                          .access = *access,
                          .fast_reg = {},
                          .pages = {}});
    const UserMr& made = mrs_.back();
    std::printf("MR %zu registered: %llu bytes at %p, lkey 0x%08x rkey 0x%08x\n", mrs_.size() - 1,
                static_cast<unsigned long long>(size), made.buffer.data(), made.mr.lkey(),
                made.mr.rkey());
    return {};
}

Status Session::post_from_lcore(unsigned qp, const rdma::SendWr& wr, const char* what) {
    const QpEntry& entry = *qps_[qp];
    Mailbox& box = lcores_[entry.lcore]->mailbox;
    box.slot = entry.slot;
    box.wr = wr;
    box.state.store(Mailbox::State::posted, std::memory_order_release);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (box.state.load(std::memory_order_acquire) != Mailbox::State::done) {
        if (std::chrono::steady_clock::now() > deadline) {
            return Error(StatusCode::busy, strformat("%s did not complete within 5 s", what));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    box.state.store(Mailbox::State::empty, std::memory_order_relaxed);
    if (box.refused) {
        return Error(StatusCode::no_resources,
                     strformat("QP %u refused the %s (is it connected, in RTS?)", qp, what));
    }
    if (box.status != rdma::WcStatus::success) {
        return Error(StatusCode::internal,
                     strformat("%s completed with %s", what,
                               std::string(rdma::wc_status_name(box.status)).c_str()));
    }
    return {};
}

// A connected QP that can carry a fast-register or an invalidate: an RC one (a UD QP takes SENDs
// only, in swroce as in rxe).
Status Session::check_rc_qp(unsigned qp, const char* what) const {
    if (Status ok = check_qp(qp, true); !ok) {
        return ok;
    }
    if (config_.ud) {
        return Error(StatusCode::invalid_parameter,
                     strformat("%s needs an RC QP; these are UD (--qp-type ud)", what));
    }
    return {};
}

Status Session::fast_register(unsigned mr_index, unsigned qp) {
    if (Status ok = check_stopped("fast-register"); !ok) {
        return ok;
    }
    if (Status ok = check_rc_qp(qp, "fast-register"); !ok) {
        return ok;
    }
    if (mr_index >= mrs_.size()) {
        return Error(StatusCode::invalid_parameter,
                     strformat("no MR %u (`register mr SIZE` makes one)", mr_index));
    }
    UserMr& mr = mrs_[mr_index];
    const auto pages = static_cast<std::uint32_t>(mr.buffer.size() / page_bytes);
    if (!mr.fast_reg) {
        Result<rdma::MemoryRegionHandle> region = pd_.alloc_fast_reg_region(pages, mr.access);
        if (!region) {
            return region.error();
        }
        mr.fast_reg = std::move(region.value());
        mr.fast_key = mr.fast_reg.lkey();
        const mem::AddressTranslator translator = mem::dpdk_translator();
        const auto* bytes = static_cast<const std::uint8_t*>(mr.buffer.data());
        for (std::uint32_t k = 0; k < pages; ++k) {
            mr.pages.push_back(
                translator.to_iova(reinterpret_cast<std::uintptr_t>(bytes + k * page_bytes)));
        }
    }
    if (mr.fast_registered) {
        return Error(StatusCode::invalid_parameter,
                     strformat("MR %u is fast-registered: `invalidate mr %u qp N` first", mr_index,
                               mr_index));
    }
    rdma::FastRegFields map;
    map.region = mr.fast_reg.get();
    map.pages = mr.pages.data();
    map.page_count = pages;
    map.page_shift = 12;
    map.length = mr.buffer.size();
    map.base_va = reinterpret_cast<std::uint64_t>(mr.buffer.data());
    map.key = mem::next_key(mr.fast_key);
    map.access = mr.access;
    const rdma::SendWr wr =
        rdma::fast_reg_wr(make_wr_id(qps_[qp]->slot, WrKind::control, 1, 0), map);
    if (Status posted = post_from_lcore(qp, wr, "FAST_REG"); !posted) {
        return posted;
    }
    mr.fast_key = wr.fast_reg.key;
    mr.fast_registered = true;
    std::printf("MR %u fast-registered on QP %u: rkey 0x%08x va 0x%llx length %zu\n", mr_index, qp,
                mr.fast_key, static_cast<unsigned long long>(wr.fast_reg.base_va),
                mr.buffer.size());
    return {};
}

Status Session::invalidate(unsigned mr_index, unsigned qp) {
    if (Status ok = check_stopped("invalidate"); !ok) {
        return ok;
    }
    if (Status ok = check_rc_qp(qp, "invalidate"); !ok) {
        return ok;
    }
    if (mr_index >= mrs_.size() || !mrs_[mr_index].fast_registered) {
        return Error(StatusCode::invalid_parameter,
                     strformat("MR %u is not fast-registered (`fast-register mr %u qp N`)",
                               mr_index, mr_index));
    }
    UserMr& mr = mrs_[mr_index];
    const rdma::SendWr wr =
        rdma::local_inv_wr(make_wr_id(qps_[qp]->slot, WrKind::control, 1, 0), mr.fast_key);
    if (Status posted = post_from_lcore(qp, wr, "LOCAL_INV"); !posted) {
        return posted;
    }
    mr.fast_registered = false;
    std::printf("MR %u invalidated on QP %u: rkey 0x%08x is dead\n", mr_index, qp, mr.fast_key);
    return {};
}

} // namespace prdma::testpmd
