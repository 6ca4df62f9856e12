// The forwarding lcore's loop: forward with its engine, drain what is in flight on `stop`, and
// between runs keep polling its CQ, because its queue group carries the ACKs and READ responses
// the peer waits for, and the control requests (create, connect, destroy) the main lcore sends
// its group.
#include "fwd_lcore.hpp"

#include <rte_cycles.h>
#include <rte_pause.h>

#include <prdma/rdmadev/fastpath.hpp>

namespace prdma::testpmd {

namespace {

void serve_mailbox(FwdLcore& lc) {
    Mailbox& box = lc.mailbox;
    if (box.state.load(std::memory_order_acquire) != Mailbox::State::posted) {
        return;
    }
    const Stream& stream = lc.streams[box.slot];
    const bool taken = rdma::post_send(stream.qp, {&box.wr, 1}) == 1;
    box.refused = !taken;
    box.state.store(taken ? Mailbox::State::in_flight : Mailbox::State::done,
                    std::memory_order_release);
}

bool drained(const FwdLcore& lc) {
    for (unsigned i = 0; i < lc.stream_count; ++i) {
        if (lc.streams[i].outstanding != 0) {
            return false;
        }
    }
    return true;
}

void begin_forwarding(FwdLcore& lc) {
    post_missing_recvs(lc);
    lc.echo = lc.engine->kind == EngineKind::echo;
    lc.engine->begin(lc, lc.tx_first);
    lc.state.store(LcoreState::forwarding, std::memory_order_release);
}

// No new work; what is in flight completes (or the deadline passes: a peer that went away). An
// empty poll too, so messages already received are counted before `stop` reads the counters.
void drain(FwdLcore& lc) {
    lc.echo = false;
    const bool empty = poll_completions(lc) == 0;
    if (lc.state.load(std::memory_order_relaxed) != LcoreState::drained &&
        ((empty && drained(lc)) || rte_get_timer_cycles() > lc.drain_deadline)) {
        lc.state.store(LcoreState::drained, std::memory_order_release);
    }
}

void park(FwdLcore& lc) {
    lc.state.store(LcoreState::parked, std::memory_order_release);
    while (lc.command.load(std::memory_order_acquire) == LcoreCommand::park) {
        rte_pause();
    }
    lc.state.store(LcoreState::idle, std::memory_order_release);
}

} // namespace

int fwd_lcore_main(void* arg) {
    FwdLcore& lc = *static_cast<FwdLcore*>(arg);
    for (;;) {
        switch (lc.command.load(std::memory_order_acquire)) {
        case LcoreCommand::forward:
            if (lc.state.load(std::memory_order_relaxed) != LcoreState::forwarding) {
                begin_forwarding(lc);
            }
            lc.engine->burst(lc);
            break;
        case LcoreCommand::drain:
            drain(lc);
            break;
        case LcoreCommand::park:
            park(lc);
            continue;
        case LcoreCommand::exit:
            if (lc.cq_handle != nullptr) {
                (void)lc.cq_handle->destroy(); // control path, while the main lcore waits
            }
            lc.state.store(LcoreState::exited, std::memory_order_release);
            return 0;
        case LcoreCommand::idle:
            if (lc.needs_recvs) {
                post_missing_recvs(lc);
            }
            // After the poll: the first one claims the queue group (session.cpp waits for it).
            poll_completions(lc);
            if (lc.state.load(std::memory_order_relaxed) != LcoreState::idle) {
                lc.state.store(LcoreState::idle, std::memory_order_release);
            }
            break;
        }
        serve_mailbox(lc);
    }
}

} // namespace prdma::testpmd
