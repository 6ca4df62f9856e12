// Asynchronous events (ibv_get_async_event, ibv_ack_async_event). A kernel device's async_fd is
// readable while events wait; here it is a semaphore eventfd counting the events the shim holds,
// so a program that polls it, or makes it non-blocking with fcntl, behaves as on a kernel device.
// prdma raises events on its control path (Context::poll_events), which only a call drives: a
// watcher thread per context calls it every few milliseconds and moves what it returns here.
// Events are turned into verbs' form when handed out, so a QP destroyed meanwhile is skipped.
// As verbs, ibv_destroy_qp (ibv_destroy_srq) waits until every event handed out for the QP (SRQ)
// has been acknowledged.
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

#include "verbs_shim.hpp"

namespace prdma::verbs {

struct AsyncEvents {
    explicit AsyncEvents(int semaphore) : fd(semaphore) {}
    AsyncEvents(const AsyncEvents&) = delete;
    AsyncEvents& operator=(const AsyncEvents&) = delete;
    AsyncEvents(AsyncEvents&&) = delete;
    AsyncEvents& operator=(AsyncEvents&&) = delete;
    ~AsyncEvents() {
        watcher.request_stop();
        if (watcher.joinable()) {
            watcher.join();
        }
        ::close(fd);
    }

    // A QP or an SRQ events are handed out for, and how many were: what its destroy waits to see
    // acknowledged.
    template <typename Object>
    struct Watched {
        Object* object = nullptr;
        std::uint32_t reported = 0;
    };
    int fd;
    std::mutex mutex;
    std::deque<rdma::Event> held;
    std::unordered_map<std::uint32_t, Watched<ibv_qp>> qps;   // by QPN
    std::unordered_map<std::uint32_t, Watched<ibv_srq>> srqs; // by SRQ number
    std::jthread watcher;                                     // last: it stops before the rest goes
};

namespace {

// Often enough that an event is seen within a few milliseconds, rarely enough to cost nothing
// beside two polling lcores.
constexpr std::chrono::milliseconds watch_period{2};

void watch(const std::stop_token& stop, ShimContext& shim, AsyncEvents& async) {
    std::array<rdma::Event, 16> got{};
    while (!stop.stop_requested()) {
        std::size_t n = 0;
        {
            const std::lock_guard lock(shim.control_mutex());
            n = shim.context.poll_events(got);
        }
        if (n > 0) {
            {
                const std::lock_guard lock(async.mutex);
                async.held.insert(async.held.end(), got.begin(), got.begin() + n);
            }
            const std::uint64_t count = n;
            (void)!::write(async.fd, &count, sizeof(count));
        }
        if (n < got.size()) {
            std::this_thread::sleep_for(watch_period);
        }
    }
}

// The oldest held event in verbs' form; false when it names a QP or SRQ no longer there (or a CQ,
// which prdma's events never name), so the caller takes the next.
bool hand_out(AsyncEvents& async, ibv_async_event& out) {
    const std::lock_guard lock(async.mutex);
    if (async.held.empty()) {
        return false;
    }
    const rdma::Event event = async.held.front();
    async.held.pop_front();
    out = {};
    switch (event.type) {
    case rdma::EventType::port_active:
    case rdma::EventType::port_error:
        out.event_type =
            event.type == rdma::EventType::port_active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
        out.element.port_num = event.port != 0 ? event.port : 1;
        return true;
    case rdma::EventType::device_removed:
        out.event_type = IBV_EVENT_DEVICE_FATAL;
        return true;
    case rdma::EventType::qp_fatal:
    case rdma::EventType::qp_last_wqe_reached: {
        auto it = async.qps.find(event.qpn);
        if (it == async.qps.end()) {
            return false;
        }
        ++it->second.reported;
        out.event_type = event.type == rdma::EventType::qp_fatal ? IBV_EVENT_QP_FATAL
                                                                 : IBV_EVENT_QP_LAST_WQE_REACHED;
        out.element.qp = it->second.object;
        return true;
    }
    case rdma::EventType::srq_limit_reached: {
        auto it = async.srqs.find(event.srqn);
        if (it == async.srqs.end()) {
            return false;
        }
        ++it->second.reported;
        out.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
        out.element.srq = it->second.object;
        return true;
    }
    case rdma::EventType::cq_error:
        return false;
    }
    return false;
}

} // namespace

Status start_async_events(ShimContext& shim) {
    const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (fd < 0) {
        return Error(StatusCode::no_resources, std::string("eventfd: ") + std::strerror(errno));
    }
    shim.async = keep(std::make_unique<AsyncEvents>(fd));
    shim.vctx.context.async_fd = fd;
    shim.async->watcher =
        std::jthread([&shim](const std::stop_token& stop) { watch(stop, shim, *shim.async); });
    return {};
}

void stop_async_events(ShimContext& shim) {
    if (shim.async != nullptr) {
        release_kept(shim.async);
        shim.async = nullptr;
        shim.vctx.context.async_fd = -1;
    }
}

namespace {

// Stops handing out `object`'s events; the number of those handed out.
template <typename Object>
std::uint32_t forget(AsyncEvents& async,
                     std::unordered_map<std::uint32_t, AsyncEvents::Watched<Object>>& watched,
                     std::uint32_t number, const Object* object) {
    const std::lock_guard lock(async.mutex);
    // Only its own entry: the number may already be another's, made after its destroy.
    auto it = watched.find(number);
    if (it == watched.end() || it->second.object != object) {
        return 0;
    }
    const std::uint32_t reported = it->second.reported;
    watched.erase(it);
    return reported;
}

// Waits, as verbs' destroy does, until the events handed out are acknowledged
// (ibv_ack_async_event counts them in events_completed).
template <typename Object>
void wait_acks(Object* object, std::uint32_t reported) {
    pthread_mutex_lock(&object->mutex);
    while (object->events_completed != reported) {
        pthread_cond_wait(&object->cond, &object->mutex);
    }
    pthread_mutex_unlock(&object->mutex);
}

template <typename Object>
void acknowledge(Object* object) {
    pthread_mutex_lock(&object->mutex);
    ++object->events_completed;
    pthread_cond_signal(&object->cond);
    pthread_mutex_unlock(&object->mutex);
}

} // namespace

void watch_qp_events(ShimContext& shim, ibv_qp* qp) {
    const std::lock_guard lock(shim.async->mutex);
    shim.async->qps[qp->qp_num] = {qp, 0};
}

std::uint32_t forget_qp_events(ShimContext& shim, ibv_qp* qp) {
    return forget(*shim.async, shim.async->qps, qp->qp_num, qp);
}

void wait_qp_acks(ibv_qp* qp, std::uint32_t reported) {
    wait_acks(qp, reported);
}

void watch_srq_events(ShimContext& shim, ibv_srq* srq) {
    const std::lock_guard lock(shim.async->mutex);
    shim.async->srqs[srq->handle] = {srq, 0};
}

std::uint32_t forget_srq_events(ShimContext& shim, ibv_srq* srq) {
    return forget(*shim.async, shim.async->srqs, srq->handle, srq);
}

void wait_srq_acks(ibv_srq* srq, std::uint32_t reported) {
    wait_acks(srq, reported);
}

} // namespace prdma::verbs

extern "C" {

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
    if (context == nullptr || event == nullptr) {
        errno = EINVAL;
        return -1;
    }
    prdma::verbs::ShimContext& shim = prdma::verbs::shim_context(context);
    if (shim.async == nullptr) {
        errno = EINVAL;
        return -1;
    }
    // Blocks while nothing is held, or fails EAGAIN when the program made async_fd non-blocking.
    std::uint64_t one = 0;
    do {
        if (::read(context->async_fd, &one, sizeof(one)) != static_cast<ssize_t>(sizeof(one))) {
            return -1;
        }
    } while (!prdma::verbs::hand_out(*shim.async, *event));
    return 0;
}

void ibv_ack_async_event(ibv_async_event* event) {
    if (event == nullptr) {
        return;
    }
    switch (event->event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        prdma::verbs::acknowledge(event->element.qp);
        return;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        prdma::verbs::acknowledge(event->element.srq);
        return;
    default:
        return; // port and device events hold nothing
    }
}

} // extern "C"
