// Completion channels and events (ibv_req_notify_cq, ibv_get_cq_event): each CQ on a channel has
// an eventfd the device writes when a completion arrives while the CQ is armed (rdma::arm_cq,
// from the thread that drives its queue group: the service lcore); the channel's fd is an epoll
// set of them, so a program that polls or epolls channel->fd wakes as it would on a kernel
// device, and ibv_get_cq_event learns which CQ fired from the epoll event.
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <prdma/rdmadev/fastpath.hpp>

#include "verbs_shim.hpp"

namespace prdma::verbs {

namespace {

// A channel's CQ count moves under its context's mutex, as libibverbs' own verbs_init_cq and
// ibv_destroy_cq do: CQs of one channel may come and go on several threads at once.
void count_cq(ibv_comp_channel* channel, int delta) {
    pthread_mutex_lock(&channel->context->mutex);
    channel->refcnt += delta;
    pthread_mutex_unlock(&channel->context->mutex);
}

} // namespace

Result<int> attach_to_channel(ibv_comp_channel* channel, ibv_cq* cq) {
    const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) {
        return Error(StatusCode::no_resources, std::string("eventfd: ") + std::strerror(errno));
    }
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.ptr = cq;
    if (::epoll_ctl(channel->fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        const int error = errno;
        ::close(fd);
        return Error(StatusCode::internal, std::string("epoll_ctl: ") + std::strerror(error));
    }
    count_cq(channel, 1);
    return fd;
}

void detach_from_channel(ibv_cq* cq, int event_fd) {
    if (cq->channel == nullptr || event_fd < 0) {
        return;
    }
    (void)::epoll_ctl(cq->channel->fd, EPOLL_CTL_DEL, event_fd, nullptr);
    ::close(event_fd);
    count_cq(cq->channel, -1);
}

int req_notify_cq_op(ibv_cq* cq, int) {
    // Solicited-only arming wakes on any completion: a spurious wake-up, which verbs programs
    // handle by polling, where a missed one would hang them.
    const StatusCode armed = rdma::arm_cq(*shim_of<ShimCq>(cq).handle);
    return armed == StatusCode::ok ? 0 : errno_of(armed);
}

} // namespace prdma::verbs

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
    const int fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) {
        prdma::verbs::refuse("ibv_create_comp_channel", errno, std::strerror(errno));
        return nullptr;
    }
    auto channel = std::make_unique<ibv_comp_channel>();
    channel->context = context;
    channel->fd = fd;
    channel->refcnt = 0;
    return channel.release(); // the caller's until ibv_destroy_comp_channel
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
    if (channel == nullptr) {
        return EINVAL;
    }
    pthread_mutex_lock(&channel->context->mutex);
    const bool used = channel->refcnt != 0;
    pthread_mutex_unlock(&channel->context->mutex);
    if (used) {
        return EBUSY; // CQs still use it
    }
    ::close(channel->fd);
    std::unique_ptr<ibv_comp_channel> owned(channel);
    return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
    if (channel == nullptr || cq == nullptr || cq_context == nullptr) {
        errno = EINVAL;
        return -1;
    }
    // A program that made channel->fd non-blocking expects EAGAIN instead of a wait, as verbs.
    const int flags = ::fcntl(channel->fd, F_GETFL);
    const int timeout = flags >= 0 && (flags & O_NONBLOCK) != 0 ? 0 : -1;
    epoll_event event{};
    int n = 0;
    do {
        n = ::epoll_wait(channel->fd, &event, 1, timeout);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        errno = n == 0 ? EAGAIN : errno;
        return -1;
    }
    auto* fired = static_cast<ibv_cq*>(event.data.ptr);
    std::uint64_t count = 0;
    (void)::read(prdma::verbs::shim_of<prdma::verbs::ShimCq>(fired).event_fd, &count,
                 sizeof(count)); // consumed: the CQ fires again only once re-armed
    *cq = fired;
    *cq_context = fired->cq_context;
    return 0;
}

} // extern "C"
