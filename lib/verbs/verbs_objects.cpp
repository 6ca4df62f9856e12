// Protection domains, memory regions and completion queues.
#include <cerrno>

#include <rte_memory.h>

#include <prdma/format.hpp>

#include "verbs_shim.hpp"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace prdma::verbs {
namespace {

constexpr std::uintptr_t page_mask = 4095;
// The end of the last page [first, first + length) touches.
constexpr std::uintptr_t page_end(std::uintptr_t first, std::size_t length) {
    return (first + length + page_mask) & ~page_mask;
}

} // namespace

// ibv_access_flags prdma has; the optional-range bits may be ignored by any provider.
Result<rdma::AccessFlags> access_of(unsigned access) {
    const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_HUGETLB;
    const unsigned unknown = access & ~(known | IBV_ACCESS_OPTIONAL_RANGE);
    if (unknown != 0) {
        return Error(StatusCode::not_supported,
                     strformat("access flags 0x%x are not supported", unknown));
    }
    rdma::AccessFlags flags;
    if ((access & IBV_ACCESS_LOCAL_WRITE) != 0) {
        flags |= mem::access_local_write;
    }
    if ((access & IBV_ACCESS_REMOTE_WRITE) != 0) {
        flags |= mem::access_remote_write;
    }
    if ((access & IBV_ACCESS_REMOTE_READ) != 0) {
        flags |= mem::access_remote_read;
    }
    if ((access & IBV_ACCESS_REMOTE_ATOMIC) != 0) {
        flags |= mem::access_remote_atomic;
    }
    return flags;
}

namespace {

// Pins what is not DPDK memory and registers [addr, addr + length) on `pd`.
Result<std::unique_ptr<MrParts>> register_parts(ShimPd& pd, void* addr, std::size_t length,
                                                rdma::AccessFlags access) {
    auto parts = std::make_unique<MrParts>();
    const auto first = reinterpret_cast<std::uintptr_t>(addr); // NOLINT: an address
    if (Status pinned = pin_pages(first & ~page_mask, page_end(first, length), parts->pinned);
        !pinned.ok()) {
        unpin_pages(parts->pinned);
        return pinned.error();
    }
    Result<rdma::MemoryRegionHandle> mr = pd.handle.register_memory(addr, length, access);
    if (!mr.ok()) {
        unpin_pages(parts->pinned);
        return mr.error();
    }
    parts->handle = std::move(mr.value());
    return parts;
}

ibv_mr* register_region(const char* verb, ibv_pd* pd, void* addr, std::size_t length,
                        std::uint64_t iova, unsigned access) {
    if (pd == nullptr || addr == nullptr || length == 0) {
        refuse(verb, EINVAL, "no PD, no address or no length");
        return nullptr;
    }
    if (iova != reinterpret_cast<std::uintptr_t>(addr)) { // NOLINT: an address
        refuse(verb, EOPNOTSUPP, "an IOVA other than the address is not supported");
        return nullptr;
    }
    Result<rdma::AccessFlags> flags = access_of(access);
    if (!flags.ok()) {
        refuse(verb, EINVAL, flags.error().message());
        return nullptr;
    }
    ContextHold hold(shim_context(pd->context), verb);
    if (!hold) {
        return nullptr;
    }
    const auto first = reinterpret_cast<std::uintptr_t>(addr); // NOLINT: an address
    if (!pages_mapped(first & ~page_mask, page_end(first, length))) {
        refuse(verb, EFAULT, strformat("%p + %zu is not all mapped memory", addr, length));
        return nullptr;
    }
    std::unique_lock lock(shim_context(pd->context).control_mutex());
    Result<std::unique_ptr<MrParts>> parts =
        register_parts(shim_of<ShimPd>(pd), addr, length, flags.value());
    lock.unlock();
    if (!parts.ok()) {
        refuse(verb, errno_of(parts.error().code()), parts.error().message());
        return nullptr;
    }
    auto shim = std::make_unique<ShimMr>();
    shim->parts = keep(std::move(parts.value()));
    shim->mr.context = pd->context;
    shim->mr.pd = pd;
    shim->mr.addr = addr;
    shim->mr.length = length;
    shim->mr.lkey = shim->parts->handle.lkey();
    shim->mr.rkey = shim->parts->handle.rkey();
    shim->mr.handle = shim->mr.lkey;
    hold.keep();
    return &shim.release()->mr; // the caller's until ibv_dereg_mr
}

} // namespace

ShimCq* make_cq(const char* verb, ibv_context* context, int cqe, void* cq_context,
                ibv_comp_channel* channel) {
    if (cqe <= 0) {
        refuse(verb, EINVAL, "a CQ needs at least one entry");
        return nullptr;
    }
    ShimContext& shim = shim_context(context);
    ContextHold hold(shim, verb);
    if (!hold) {
        return nullptr;
    }
    auto made = std::make_unique<ShimCq>();
    ibv_cq* cq = ibv_cq_ex_to_cq(&made->cq);
    if (channel != nullptr) {
        Result<int> fd = attach_to_channel(channel, cq);
        if (!fd.ok()) {
            refuse(verb, errno_of(fd.error().code()), fd.error().message());
            return nullptr;
        }
        made->event_fd = fd.value();
        made->cq.channel = channel;
    }
    const std::lock_guard lock(shim.control_mutex());
    const std::uint64_t request = next_request(shim);
    Result<rdma::CompletionQueue> created =
        shim.context.create_cq(static_cast<std::uint32_t>(cqe), 0, request, made->event_fd);
    if (const Status status = await_created(shim, request, created); !status.ok()) {
        detach_from_channel(cq, made->event_fd);
        refuse(verb, errno_of(status.error().code()), status.error().message());
        return nullptr;
    }
    made->handle = keep(std::make_unique<rdma::CompletionQueue>(std::move(created.value())));
    made->room = keep(std::make_unique<CompletionRoom>());
    made->cq.context = context;
    made->cq.cq_context = cq_context;
    made->cq.cqe = cqe;
    pthread_mutex_init(&made->cq.mutex, nullptr);
    pthread_cond_init(&made->cq.cond, nullptr);
    hold.keep();
    return made.release(); // the caller's until ibv_destroy_cq
}

} // namespace prdma::verbs

using prdma::verbs::refuse;
using prdma::verbs::shim_of;
using prdma::verbs::ShimContext;
using prdma::verbs::ShimCq;
using prdma::verbs::ShimMr;
using prdma::verbs::ShimPd;

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
    ShimContext& shim = prdma::verbs::shim_context(context);
    prdma::verbs::ContextHold hold(shim, "ibv_alloc_pd");
    if (!hold) {
        return nullptr;
    }
    const std::lock_guard lock(shim.control_mutex());
    prdma::Result<prdma::rdma::ProtectionDomain> pd = shim.context.alloc_pd();
    if (!pd.ok()) {
        refuse("ibv_alloc_pd", prdma::verbs::errno_of(pd.error().code()), pd.error().message());
        return nullptr;
    }
    auto made = std::make_unique<ShimPd>();
    made->handle = std::move(pd.value());
    made->pd.context = context;
    made->pd.handle = made->handle.id();
    hold.keep();
    return &made.release()->pd; // the caller's until ibv_dealloc_pd
}

int ibv_dealloc_pd(ibv_pd* pd) {
    std::unique_ptr<ShimPd> shim(&shim_of<ShimPd>(pd));
    std::unique_lock lock(prdma::verbs::shim_context(pd->context).control_mutex());
    if (prdma::Status destroyed = shim->handle.destroy(); !destroyed.ok()) {
        refuse("ibv_dealloc_pd", prdma::verbs::errno_of(destroyed.error().code()),
               destroyed.error().message());
        (void)shim.release(); // still the caller's: its MRs or QPs are alive
        return errno;
    }
    lock.unlock(); // the last release may free the context
    prdma::verbs::release_context(prdma::verbs::shim_context(pd->context));
    return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
    return prdma::verbs::register_region("ibv_reg_mr", pd, addr, length,
                                         reinterpret_cast<std::uintptr_t>(addr), // NOLINT
                                         static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
    return prdma::verbs::register_region("ibv_reg_mr_iova", pd, addr, length, iova,
                                         static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
    return prdma::verbs::register_region("ibv_reg_mr_iova2", pd, addr, length, iova, access);
}

int ibv_dereg_mr(ibv_mr* mr) {
    std::unique_ptr<ShimMr> shim(&shim_of<ShimMr>(mr));
    ShimContext& context = prdma::verbs::shim_context(mr->context);
    std::unique_lock lock(context.control_mutex());
    // A queue group another thread drives must let go of the key first: that may pend.
    const std::uint64_t request = prdma::verbs::next_request(context);
    if (prdma::Status gone =
            prdma::verbs::await_control(context, request, shim->parts->handle.deregister(request));
        !gone.ok()) {
        refuse("ibv_dereg_mr", prdma::verbs::errno_of(gone.error().code()), gone.error().message());
        (void)shim.release();
        return errno;
    }
    prdma::verbs::unpin_pages(shim->parts->pinned);
    prdma::verbs::release_kept(shim->parts);
    lock.unlock(); // the last release may free the context
    prdma::verbs::release_context(context);
    return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int) {
    ShimCq* made = prdma::verbs::make_cq("ibv_create_cq", context, cqe, cq_context, channel);
    return made != nullptr ? ibv_cq_ex_to_cq(&made->cq) : nullptr;
}

int ibv_destroy_cq(ibv_cq* cq) {
    std::unique_ptr<ShimCq> shim(&shim_of<ShimCq>(cq));
    if (const int error = prdma::verbs::destroy_and_wait(
            "ibv_destroy_cq", prdma::verbs::shim_context(cq->context), *shim->handle, [] {});
        error != 0) {
        (void)shim.release(); // QPs still use it
        return error;
    }
    prdma::verbs::release_kept(shim->handle);
    prdma::verbs::release_kept(shim->room);
    prdma::verbs::detach_from_channel(cq, shim->event_fd);
    pthread_cond_destroy(&cq->cond);
    pthread_mutex_destroy(&cq->mutex);
    prdma::verbs::release_context(prdma::verbs::shim_context(cq->context));
    return 0;
}

} // extern "C"
