// A verbs program (linked with libibverbs, run with libprdma-verbs preloaded: meson sets
// LD_PRELOAD) on two swroce devices joined by a memif link inside this one process: asynchronous
// events (a QP the device failed, handed to the context that holds it, and a destroy that waits
// for their acknowledgement), async_fd made non-blocking, extended CQs read one completion at a
// time, the ibv_wr_* builders, a shared receive queue serving two QPs, and bad use answered with
// verbs' error numbers: a modify without a required attribute, a post on a QP in RESET, an MR over
// unmapped memory, and verbs on a context closed with objects left; control verbs from many
// threads on three contexts of one device.
#include <arpa/inet.h>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <future>
#include <infiniband/verbs.h>
#include <memory>
#include <mutex>
#include <poll.h>
#include <set>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;

// A QP on `cq` (RC unless `type` says) with four send and four receive WRs of one SGE each.
ibv_qp_init_attr small_qp(ibv_cq* cq, ibv_qp_type type = IBV_QPT_RC) {
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = type;
    init.cap = {.max_send_wr = 4,
                .max_recv_wr = 4,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = 0};
    return init;
}

// Both devices, brought up by the shim from PRDMA_EAL_ARGS on the first verb.
class VerbsProgram : public ::testing::Test {
protected:
    // The memif socket's directory, removed at exit: after the shim's own exit handler (registered
    // later, at its bring-up, so run earlier) has taken the devices down.
    static std::string& socket_dir() {
        static std::string dir;
        return dir;
    }

    static void SetUpTestSuite() {
        if (socket_dir().empty()) {
            std::string name = "/tmp/prdma-verbs-program-XXXXXX";
            ASSERT_NE(::mkdtemp(name.data()), nullptr) << std::strerror(errno);
            socket_dir() = name;
            std::atexit([] { std::filesystem::remove_all(socket_dir()); });
        }
        const std::string sock = socket_dir() + "/memif.sock";
        const std::string sock2 = socket_dir() + "/memif2.sock";
        const std::string args = "-l 0,1 --main-lcore 0 -S 1 --no-huge -m 256 --log-level=*:error "
                                 "--vdev=net_memif0,role=server,socket=" +
                                 sock +
                                 ",socket-abstract=no "
                                 "--vdev=net_memif1,role=client,socket=" +
                                 sock +
                                 ",socket-abstract=no "
                                 "--vdev=rdma_swroce0,port=net_memif0,ip=10.9.0.1,progress=service "
                                 "--vdev=rdma_swroce1,port=net_memif1,ip=10.9.0.2,progress=service "
                                 // Devices whose queue groups the polling thread drives.
                                 "--vdev=net_memif2,role=server,socket=" +
                                 sock2 +
                                 ",socket-abstract=no "
                                 "--vdev=net_memif3,role=client,socket=" +
                                 sock2 +
                                 ",socket-abstract=no "
                                 "--vdev=rdma_swroce2,port=net_memif2,ip=10.9.1.1,progress=poll "
                                 "--vdev=rdma_swroce3,port=net_memif3,ip=10.9.1.2,progress=poll";
        ::setenv("PRDMA_EAL_ARGS", args.c_str(), 1);
    }

    void SetUp() override {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        ASSERT_NE(list, nullptr);
        for (int i = 0; i < n; ++i) {
            const std::string name = ibv_get_device_name(list[i]);
            if (name == "rdma_swroce0") {
                a_ = ibv_open_device(list[i]);
            } else if (name == "rdma_swroce1") {
                b_ = ibv_open_device(list[i]);
            }
        }
        ibv_free_device_list(list);
        ASSERT_NE(a_, nullptr) << "no rdma_swroce0: is libprdma-verbs preloaded?";
        ASSERT_NE(b_, nullptr);
    }

    void TearDown() override {
        for (ibv_context* c : {a_, b_}) {
            if (c != nullptr) {
                EXPECT_EQ(ibv_close_device(c), 0);
            }
        }
    }

    struct Side {
        ibv_pd* pd = nullptr;
        ibv_cq* cq = nullptr;
        ibv_cq_ex* cq_ex = nullptr;
        ibv_qp* qp = nullptr;
        std::vector<char> buf = std::vector<char>(4096);
        ibv_mr* mr = nullptr;
    };

    // With `wc_flags`, the CQ is an extended one (ibv_create_cq_ex) asking for those fields.
    // With `send_ops`, the QP is an extended one (ibv_create_qp_ex) with those ibv_wr_* builders
    // and 64 B of inline room.
    static void make_side(ibv_context* ctx, Side& s, std::uint64_t wc_flags = 0,
                          std::uint64_t send_ops = 0) {
        s.pd = ibv_alloc_pd(ctx);
        ASSERT_NE(s.pd, nullptr);
        if (wc_flags != 0) {
            ibv_cq_init_attr_ex attr{};
            attr.cqe = 16;
            attr.wc_flags = wc_flags;
            s.cq_ex = ibv_create_cq_ex(ctx, &attr);
            ASSERT_NE(s.cq_ex, nullptr);
            s.cq = ibv_cq_ex_to_cq(s.cq_ex);
        } else {
            s.cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
        }
        ASSERT_NE(s.cq, nullptr);
        ibv_qp_init_attr init{};
        init.send_cq = s.cq;
        init.recv_cq = s.cq;
        init.qp_type = IBV_QPT_RC;
        init.cap = {.max_send_wr = 8,
                    .max_recv_wr = 8,
                    .max_send_sge = 1,
                    .max_recv_sge = 1,
                    .max_inline_data = 0};
        if (send_ops != 0) {
            ibv_qp_init_attr_ex ex{};
            ex.send_cq = init.send_cq;
            ex.recv_cq = init.recv_cq;
            ex.qp_type = IBV_QPT_RC;
            ex.cap = init.cap;
            ex.cap.max_inline_data = 64;
            ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
            ex.pd = s.pd;
            ex.send_ops_flags = send_ops;
            s.qp = ibv_create_qp_ex(ctx, &ex);
        } else {
            s.qp = ibv_create_qp(s.pd, &init);
        }
        ASSERT_NE(s.qp, nullptr);
        s.mr = ibv_reg_mr(s.pd, s.buf.data(), s.buf.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        ASSERT_NE(s.mr, nullptr);
    }

    static void connect(ibv_context* ctx, ibv_qp* qp, ibv_context* peer_ctx, ibv_qp* peer) {
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_INIT;
        attr.port_num = 1;
        attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        ASSERT_EQ(
            ibv_modify_qp(qp, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
        attr = {};
        attr.qp_state = IBV_QPS_RTR;
        attr.path_mtu = IBV_MTU_1024;
        attr.dest_qp_num = peer->qp_num;
        attr.rq_psn = 0;
        attr.max_dest_rd_atomic = 1;
        attr.min_rnr_timer = 12;
        attr.ah_attr.is_global = 1;
        attr.ah_attr.port_num = 1;
        attr.ah_attr.grh.hop_limit = 64;
        ASSERT_EQ(ibv_query_gid(peer_ctx, 1, 0, &attr.ah_attr.grh.dgid), 0);
        (void)ctx;
        ASSERT_EQ(ibv_modify_qp(qp, &attr,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                    IBV_QP_MIN_RNR_TIMER),
                  0);
        attr = {};
        attr.qp_state = IBV_QPS_RTS;
        attr.timeout = 14;
        attr.retry_cnt = 7;
        attr.rnr_retry = 7;
        attr.sq_psn = 0;
        attr.max_rd_atomic = 1;
        ASSERT_EQ(ibv_modify_qp(qp, &attr,
                                IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
                  0);
    }

    static void free_side(Side& s) {
        EXPECT_EQ(ibv_dereg_mr(s.mr), 0);
        EXPECT_EQ(ibv_destroy_qp(s.qp), 0);
        EXPECT_EQ(ibv_destroy_cq(s.cq), 0);
        EXPECT_EQ(ibv_dealloc_pd(s.pd), 0);
    }

    // The next event on ctx, waited for with poll() on its async_fd (made non-blocking).
    static bool next_event(ibv_context* ctx, ibv_async_event& event,
                           std::chrono::milliseconds wait) {
        pollfd fd{.fd = ctx->async_fd, .events = POLLIN, .revents = 0};
        if (::poll(&fd, 1, static_cast<int>(wait.count())) != 1) {
            return false;
        }
        return ibv_get_async_event(ctx, &event) == 0;
    }

    static void make_nonblocking(ibv_context* ctx) {
        const int flags = ::fcntl(ctx->async_fd, F_GETFL);
        ASSERT_EQ(::fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
    }

    ibv_context* a_ = nullptr;
    ibv_context* b_ = nullptr;
};

// First in the file: the ARP caches are empty, so each side's RTR resolves its peer's MAC. The
// reply reaches the service lcore, which used to finish the RTR itself: waiting there for a hold
// of a group it was driving cost 100 ms per RTR (and touched the control path's state from the
// service lcore). The control path finishes it now: the connects take milliseconds (the second
// side learned the first's MAC from its request).
TEST_F(VerbsProgram, TheFirstConnectWaitsForArpAlone) {
    Side a;
    Side b;
    make_side(a_, a);
    make_side(b_, b);
    // The links up first: a request sent before would go again only after ARP's 200 ms retry.
    const auto up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (ibv_context* ctx : {a_, b_}) {
        ibv_port_attr port{};
        while (ibv_query_port(ctx, 1, &port) == 0 && port.state != IBV_PORT_ACTIVE &&
               std::chrono::steady_clock::now() < up) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_EQ(port.state, IBV_PORT_ACTIVE);
    }
    const auto start = std::chrono::steady_clock::now();
    connect(a_, a.qp, b_, b.qp);
    connect(b_, b.qp, a_, a.qp);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::milliseconds(80))
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
    free_side(a);
    free_side(b);
}

TEST_F(VerbsProgram, NothingWaitsOnANewContext) {
    ASSERT_GE(a_->async_fd, 0);
    make_nonblocking(a_);
    ibv_async_event event{};
    errno = 0;
    EXPECT_EQ(ibv_get_async_event(a_, &event), -1);
    EXPECT_EQ(errno, EAGAIN);
}

TEST_F(VerbsProgram, AFailedQpIsReportedToItsContextAndItsDestroyWaitsForTheAck) {
    Side a;
    Side b;
    make_side(a_, a);
    make_side(b_, b);
    connect(a_, a.qp, b_, b.qp);
    connect(b_, b.qp, a_, a.qp);
    make_nonblocking(a_);
    make_nonblocking(b_);

    // A WRITE with a key B never gave: B answers with a remote access NAK, and A's device moves
    // the QP to ERR itself.
    ibv_sge sge{
        .addr = reinterpret_cast<std::uintptr_t>(a.buf.data()), .length = 64, .lkey = a.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(b.buf.data());
    wr.wr.rdma.rkey = b.mr->rkey ^ 0x5a5a00U;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
    ibv_wc wc{};
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (ibv_poll_cq(a.cq, 1, &wc) == 0) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no completion";
    }
    EXPECT_EQ(wc.wr_id, 7U);
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);

    ibv_async_event fatal{};
    ASSERT_TRUE(next_event(a_, fatal, 5000ms)) << "no async event for the failed QP";
    EXPECT_EQ(fatal.event_type, IBV_EVENT_QP_FATAL);
    EXPECT_EQ(fatal.element.qp, a.qp);
    ibv_async_event last{};
    ASSERT_TRUE(next_event(a_, last, 5000ms));
    EXPECT_EQ(last.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
    EXPECT_EQ(last.element.qp, a.qp);
    // IBTA (and rxe): a responder that NAKs a remote access error leaves its QP in ERR too.
    ibv_async_event responder{};
    ASSERT_TRUE(next_event(b_, responder, 5000ms));
    EXPECT_EQ(responder.event_type, IBV_EVENT_QP_FATAL);
    EXPECT_EQ(responder.element.qp, b.qp);
    ibv_ack_async_event(&responder);

    // As verbs: the destroy returns once both events handed out are acknowledged.
    auto destroyed = std::async(std::launch::async, [&] { return ibv_destroy_qp(a.qp); });
    EXPECT_EQ(destroyed.wait_for(200ms), std::future_status::timeout);
    ibv_ack_async_event(&fatal);
    ibv_ack_async_event(&last);
    ASSERT_EQ(destroyed.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(destroyed.get(), 0);
    a.qp = nullptr;

    EXPECT_EQ(ibv_dereg_mr(a.mr), 0);
    EXPECT_EQ(ibv_destroy_cq(a.cq), 0);
    EXPECT_EQ(ibv_dealloc_pd(a.pd), 0);
    free_side(b);
}

TEST_F(VerbsProgram, BadUseGetsVerbsErrorNumbers) {
    Side a;
    make_side(a_, a);

    // RESET to INIT needs the port.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    EXPECT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS), EINVAL);

    // A post on a QP in RESET.
    ibv_sge sge{
        .addr = reinterpret_cast<std::uintptr_t>(a.buf.data()), .length = 8, .lkey = a.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
    EXPECT_EQ(bad, &wr);

    // An MR over pages that are not mapped.
    const long page = ::sysconf(_SC_PAGESIZE);
    void* gone =
        ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(gone, MAP_FAILED);
    ASSERT_EQ(::munmap(gone, 4 * page), 0);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(a.pd, gone, 4 * page, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, EFAULT);

    // Closed with objects left: the close succeeds, as verbs', new objects are refused, and the
    // objects left are still destroyed cleanly (the last one frees the context).
    EXPECT_EQ(ibv_close_device(a_), 0);
    ibv_context* closed = a_;
    a_ = nullptr;
    errno = 0;
    EXPECT_EQ(ibv_alloc_pd(closed), nullptr);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(ibv_create_cq(closed, 4, nullptr, nullptr, 0), nullptr);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(ibv_reg_mr(a.pd, a.buf.data(), 64, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, EBADF);
    free_side(a);
}

// A UD QP and an address handle as ibv_ud_pingpong makes them, its attributes read back, and
// what verbs refuses: an AH without a GRH, a datagram over the port MTU, an RDMA WRITE on UD.
TEST_F(VerbsProgram, AUdQpSendsThroughAnAddressHandleAndRefusesWhatUdCannot) {
    ibv_pd* pd = ibv_alloc_pd(a_);
    ASSERT_NE(pd, nullptr);
    ibv_cq* cq = ibv_create_cq(a_, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
    ibv_qp_init_attr init = small_qp(cq, IBV_QPT_UD);
    ibv_qp* qp = ibv_create_qp(pd, &init);
    ASSERT_NE(qp, nullptr);
    EXPECT_EQ(qp->qp_type, IBV_QPT_UD);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qkey = 0x11111111;
    ASSERT_EQ(
        ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    attr = {};
    attr.qp_state = IBV_QPS_RTR;
    EXPECT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_DEST_QPN), EINVAL)
        << "a UD QP has no destination";
    ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE), 0);
    attr.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
    ibv_qp_init_attr got{};
    ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_QKEY | IBV_QP_CAP, &got), 0);
    EXPECT_EQ(got.qp_type, IBV_QPT_UD);
    EXPECT_EQ(attr.qkey, 0x11111111U);

    ibv_ah_attr ah_attr{};
    ah_attr.port_num = 1;
    errno = 0;
    EXPECT_EQ(ibv_create_ah(pd, &ah_attr), nullptr);
    EXPECT_EQ(errno, EINVAL) << "RoCE needs the GRH";
    ah_attr.is_global = 1;
    ah_attr.grh.hop_limit = 1;
    ASSERT_EQ(ibv_query_gid(b_, 1, 0, &ah_attr.grh.dgid), 0);
    ibv_ah* ah = ibv_create_ah(pd, &ah_attr); // waits for ARP to find b
    ASSERT_NE(ah, nullptr) << std::strerror(errno);

    std::vector<char> buf(2048);
    ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), 1025, mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud = {ah, 0x11, 0x11111111};
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qp, &wr, &bad), EINVAL) << "over the 1024 B port MTU";
    EXPECT_EQ(bad, &wr);
    sge.length = 16;
    ibv_send_wr write = wr;
    write.opcode = IBV_WR_RDMA_WRITE;
    write.wr.rdma = {0x1000, mr->rkey}; // the peer's address, unmapped here: not an AH
    bad = nullptr;
    EXPECT_EQ(ibv_post_send(qp, &write, &bad), EINVAL) << "UD carries SENDs only";
    EXPECT_EQ(bad, &write);
    wr.send_flags = IBV_SEND_SIGNALED;
    ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
    ibv_wc wc{};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int n = 0;
    while (n == 0 && std::chrono::steady_clock::now() < deadline) {
        n = ibv_poll_cq(cq, 1, &wc);
    }
    ASSERT_EQ(n, 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_SEND);

    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
    EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY) << "the AH lives on it";
    EXPECT_EQ(ibv_destroy_ah(ah), 0);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// Both ends: a datagram through ibv_wr_set_ud_addr whose AH is destroyed right after the post,
// received behind its GRH (IBV_WC_GRH, src_qp, byte_len read through an extended CQ), then the
// reply addressed from the GRH alone (ibv_create_ah_from_wc), as a UD server answers a client.
TEST_F(VerbsProgram, AUdServerAnswersWhoeverItsGrhNames) {
    Side a;
    Side b;
    const std::uint64_t ex_flags =
        IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_QP_NUM;
    for (auto [ctx, s] : {std::pair{a_, &a}, std::pair{b_, &b}}) {
        s->pd = ibv_alloc_pd(ctx);
        ibv_cq_init_attr_ex cq_attr{};
        cq_attr.cqe = 16;
        cq_attr.wc_flags = ex_flags;
        s->cq_ex = ibv_create_cq_ex(ctx, &cq_attr);
        ASSERT_NE(s->cq_ex, nullptr);
        s->cq = ibv_cq_ex_to_cq(s->cq_ex);
        const ibv_qp_init_attr ud = small_qp(s->cq, IBV_QPT_UD);
        ibv_qp_init_attr_ex init{};
        init.send_cq = ud.send_cq;
        init.recv_cq = ud.recv_cq;
        init.qp_type = ud.qp_type;
        init.cap = ud.cap;
        init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        init.pd = s->pd;
        init.send_ops_flags = IBV_QP_EX_WITH_SEND;
        s->qp = ibv_create_qp_ex(ctx, &init);
        ASSERT_NE(s->qp, nullptr);
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_INIT;
        attr.port_num = 1;
        attr.qkey = 0x22;
        ASSERT_EQ(ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY), 0);
        attr.qp_state = IBV_QPS_RTR;
        ASSERT_EQ(ibv_modify_qp(s->qp, &attr, IBV_QP_STATE), 0);
        attr.qp_state = IBV_QPS_RTS;
        ASSERT_EQ(ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
        s->mr = ibv_reg_mr(s->pd, s->buf.data(), s->buf.size(), IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(s->mr, nullptr);
    }
    const auto post_receive = [](Side& s) {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(s.buf.data()), 40 + 64, s.mr->lkey};
        ibv_recv_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_recv(s.qp, &wr, &bad), 0);
    };
    // The receive's completion, read through the extended CQ (the wc an application keeps).
    const auto receive = [](Side& s, ibv_wc& out) {
        ibv_poll_cq_attr attr{};
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < deadline) {
            if (ibv_start_poll(s.cq_ex, &attr) != 0) {
                continue;
            }
            do {
                if (ibv_wc_read_opcode(s.cq_ex) == IBV_WC_RECV) {
                    out = {};
                    out.status = s.cq_ex->status;
                    out.wc_flags = ibv_wc_read_wc_flags(s.cq_ex);
                    out.byte_len = ibv_wc_read_byte_len(s.cq_ex);
                    out.src_qp = ibv_wc_read_src_qp(s.cq_ex);
                    out.qp_num = ibv_wc_read_qp_num(s.cq_ex);
                    ibv_end_poll(s.cq_ex);
                    return true;
                }
            } while (ibv_next_poll(s.cq_ex) == 0);
            ibv_end_poll(s.cq_ex);
        }
        return false;
    };
    post_receive(b);
    ibv_ah_attr to_b{};
    to_b.is_global = 1;
    to_b.port_num = 1;
    ASSERT_EQ(ibv_query_gid(b_, 1, 0, &to_b.grh.dgid), 0);
    ibv_ah* ah = ibv_create_ah(a.pd, &to_b);
    ASSERT_NE(ah, nullptr);
    std::memcpy(a.buf.data(), "request", 8);
    ibv_qp_ex* qpx = ibv_qp_to_qp_ex(a.qp);
    ASSERT_NE(qpx, nullptr);
    ibv_wr_start(qpx);
    qpx->wr_id = 1;
    qpx->wr_flags = 0;
    ibv_wr_send(qpx);
    ibv_wr_set_ud_addr(qpx, ah, b.qp->qp_num, 0x22);
    ibv_wr_set_sge(qpx, a.mr->lkey, reinterpret_cast<std::uintptr_t>(a.buf.data()), 8);
    ASSERT_EQ(ibv_wr_complete(qpx), 0);
    EXPECT_EQ(ibv_destroy_ah(ah), 0) << "the posted SEND has its own copy of the destination";

    ibv_wc got{};
    ASSERT_TRUE(receive(b, got)) << "b received nothing";
    EXPECT_EQ(got.status, IBV_WC_SUCCESS);
    EXPECT_TRUE((got.wc_flags & IBV_WC_GRH) != 0);
    EXPECT_EQ(got.byte_len, 40U + 8U);
    EXPECT_EQ(got.src_qp, a.qp->qp_num);
    EXPECT_EQ(got.qp_num, b.qp->qp_num);
    EXPECT_STREQ(b.buf.data() + 40, "request");

    // The reply goes to whoever the GRH names: a, found from the datagram alone.
    post_receive(a);
    ibv_ah* back = ibv_create_ah_from_wc(b.pd, &got, reinterpret_cast<ibv_grh*>(b.buf.data()), 1);
    ASSERT_NE(back, nullptr) << std::strerror(errno);
    std::memcpy(b.buf.data() + 512, "reply", 6);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(b.buf.data() + 512), 6, b.mr->lkey};
    ibv_send_wr reply{};
    reply.sg_list = &sge;
    reply.num_sge = 1;
    reply.opcode = IBV_WR_SEND;
    reply.wr.ud = {back, got.src_qp, 0x22};
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(b.qp, &reply, &bad), 0);
    ibv_wc answer{};
    ASSERT_TRUE(receive(a, answer)) << "a received no reply";
    EXPECT_EQ(answer.src_qp, b.qp->qp_num);
    EXPECT_STREQ(a.buf.data() + 40, "reply");
    ibv_wc no_grh = got;
    no_grh.wc_flags &= ~unsigned{IBV_WC_GRH};
    ibv_ah_attr attr{};
    EXPECT_NE(ibv_init_ah_from_wc(b_, 1, &no_grh, reinterpret_cast<ibv_grh*>(b.buf.data()), &attr),
              0)
        << "RoCE answers no one without a GRH";
    EXPECT_EQ(ibv_destroy_ah(back), 0);
    for (Side* s : {&a, &b}) {
        EXPECT_EQ(ibv_destroy_qp(s->qp), 0);
        EXPECT_EQ(ibv_dereg_mr(s->mr), 0);
        EXPECT_EQ(ibv_destroy_cq(s->cq), 0);
        EXPECT_EQ(ibv_dealloc_pd(s->pd), 0);
    }
}

TEST_F(VerbsProgram, AnExtendedCqHandsOutEachCompletionOnceHoweverItIsPolled) {
    Side a;
    Side b;
    make_side(a_, a);
    make_side(b_, b, IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM);
    connect(a_, a.qp, b_, b.qp);
    connect(b_, b.qp, a_, a.qp);
    constexpr int count = 6;
    for (int i = 0; i < count; ++i) {
        ibv_sge sge{.addr = reinterpret_cast<std::uintptr_t>(b.buf.data()) + 64U * i,
                    .length = 64,
                    .lkey = b.mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = 100U + i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_recv(b.qp, &wr, &bad), 0);
    }
    for (int i = 0; i < count; ++i) {
        ibv_sge sge{.addr = reinterpret_cast<std::uintptr_t>(a.buf.data()),
                    .length = 8,
                    .lkey = a.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = static_cast<std::uint64_t>(i);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.imm_data = htonl(0x1000U + i);
        ibv_send_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    std::array<ibv_wc, count> sent{};
    for (int got = 0; got < count;) {
        got += ibv_poll_cq(a.cq, count - got, sent.data() + got);
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "sends not completed";
    }

    // Two completions read field by field, then the poll ends early.
    ibv_poll_cq_attr attr{};
    int status = ENOENT;
    while ((status = ibv_start_poll(b.cq_ex, &attr)) == ENOENT) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no receive completion";
    }
    ASSERT_EQ(status, 0);
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(b.cq_ex->status, IBV_WC_SUCCESS);
        EXPECT_EQ(b.cq_ex->wr_id, 100U + i);
        EXPECT_EQ(ibv_wc_read_opcode(b.cq_ex), IBV_WC_RECV);
        EXPECT_EQ(ibv_wc_read_byte_len(b.cq_ex), 8U);
        EXPECT_NE(ibv_wc_read_wc_flags(b.cq_ex) & IBV_WC_WITH_IMM, 0U);
        EXPECT_EQ(ntohl(ibv_wc_read_imm_data(b.cq_ex)), 0x1000U + i);
        EXPECT_EQ(ibv_wc_read_qp_num(b.cq_ex), b.qp->qp_num);
        if (i == 0) {
            while ((status = ibv_next_poll(b.cq_ex)) == ENOENT) {
                ASSERT_LT(std::chrono::steady_clock::now(), deadline);
            }
            ASSERT_EQ(status, 0);
        }
    }
    ibv_end_poll(b.cq_ex);

    // The rest, through ibv_poll_cq: none lost to the early end, none handed out twice.
    std::array<ibv_wc, count> rest{};
    for (int got = 0; got < count - 2;) {
        got += ibv_poll_cq(b.cq, count - 2 - got, rest.data() + got);
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "receive completions lost";
    }
    for (int i = 0; i < count - 2; ++i) {
        EXPECT_EQ(rest[i].wr_id, 102U + i);
        EXPECT_EQ(ntohl(rest[i].imm_data), 0x1002U + i);
    }
    EXPECT_EQ(ibv_start_poll(b.cq_ex, &attr), ENOENT) << "a completion handed out twice";
    free_side(a);
    free_side(b);
}

TEST_F(VerbsProgram, AnExtendedCqRefusesFieldsItCannotFill) {
    ibv_cq_init_attr_ex attr{};
    attr.cqe = 4;
    attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    errno = 0;
    EXPECT_EQ(ibv_create_cq_ex(a_, &attr), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
    attr.comp_vector = 1; // one vector: 0
    EXPECT_EQ(ibv_create_cq_ex(a_, &attr), nullptr);
    EXPECT_EQ(errno, EINVAL);
}

TEST_F(VerbsProgram, TheWrBuildersPostABatchAsOnePost) {
    Side a;
    Side b;
    make_side(a_, a, 0, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND_WITH_IMM);
    make_side(b_, b);
    ASSERT_EQ(ibv_qp_to_qp_ex(b.qp), nullptr) << "a QP made without send_ops_flags";
    ibv_qp_ex* qpx = ibv_qp_to_qp_ex(a.qp);
    ASSERT_NE(qpx, nullptr);
    EXPECT_EQ(qpx->wr_rdma_read, nullptr) << "an operation not asked for";
    connect(a_, a.qp, b_, b.qp);
    connect(b_, b.qp, a_, a.qp);
    ibv_sge rsge{.addr = reinterpret_cast<std::uintptr_t>(b.buf.data()) + 1024,
                 .length = 64,
                 .lkey = b.mr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = 50;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    ASSERT_EQ(ibv_post_recv(b.qp, &rwr, &rbad), 0);
    std::memcpy(a.buf.data(), "written by ibv_wr", 17);

    // Data given before any operation: the batch fails whole and nothing is posted.
    ibv_wr_start(qpx);
    ibv_wr_set_sge(qpx, a.mr->lkey, reinterpret_cast<std::uintptr_t>(a.buf.data()), 17);
    EXPECT_EQ(ibv_wr_complete(qpx), EINVAL);

    std::array<char, 8> inline_text{'i', 'n', 'l', 'i', 'n', 'e', '!', '\0'};
    ibv_wr_start(qpx);
    qpx->wr_id = 1;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qpx, b.mr->rkey, reinterpret_cast<std::uintptr_t>(b.buf.data()));
    ibv_wr_set_sge(qpx, a.mr->lkey, reinterpret_cast<std::uintptr_t>(a.buf.data()), 17);
    qpx->wr_id = 2;
    ibv_wr_send_imm(qpx, htonl(7));
    ibv_wr_set_inline_data(qpx, inline_text.data(), 7);
    inline_text.fill('x'); // verbs: the buffer is the program's again once given
    ASSERT_EQ(ibv_wr_complete(qpx), 0);

    const auto deadline = std::chrono::steady_clock::now() + 10s;
    std::array<ibv_wc, 2> done{};
    for (int got = 0; got < 2;) {
        got += ibv_poll_cq(a.cq, 2 - got, done.data() + got);
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "batch not completed";
    }
    EXPECT_EQ(done[0].wr_id, 1U);
    EXPECT_EQ(done[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(done[0].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(done[1].wr_id, 2U);
    EXPECT_EQ(done[1].opcode, IBV_WC_SEND);
    ibv_wc received{};
    while (ibv_poll_cq(b.cq, 1, &received) == 0) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no receive";
    }
    EXPECT_EQ(received.wr_id, 50U);
    EXPECT_EQ(received.byte_len, 7U);
    EXPECT_EQ(ntohl(received.imm_data), 7U);
    EXPECT_EQ(std::string(b.buf.data() + 1024, 7), "inline!");
    EXPECT_EQ(std::string(b.buf.data(), 17), "written by ibv_wr");
    free_side(a);
    free_side(b);
}

// Two QPs take their receives from one SRQ, in the order posted, whichever QP a SEND arrives on;
// the SRQ's limit event is raised once, to its context, and its destroy is refused while QPs use
// it and waits, as verbs', until the event handed out is acknowledged.
TEST_F(VerbsProgram, OneSrqServesTwoQpsAndRaisesItsLimitOnce) {
    ibv_device_attr dev{};
    ASSERT_EQ(ibv_query_device(b_, &dev), 0);
    EXPECT_GT(dev.max_srq, 0);
    EXPECT_GT(dev.max_srq_wr, 0);
    EXPECT_GT(dev.max_srq_sge, 0);

    std::array<Side, 2> a;
    make_side(a_, a[0]);
    make_side(a_, a[1]);
    ibv_pd* pd = ibv_alloc_pd(b_);
    ASSERT_NE(pd, nullptr);
    ibv_cq* cq = ibv_create_cq(b_, 32, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
    std::vector<char> buf(4096);
    ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_srq_init_attr srq_init{};
    srq_init.attr = {.max_wr = 16, .max_sge = 1, .srq_limit = 0};
    ibv_srq* srq = ibv_create_srq(pd, &srq_init);
    ASSERT_NE(srq, nullptr);
    EXPECT_GE(srq_init.attr.max_wr, 16U);
    std::array<ibv_qp*, 2> qps{};
    for (ibv_qp*& qp : qps) {
        ibv_qp_init_attr init = small_qp(cq);
        init.srq = srq;
        init.cap.max_recv_wr = 0;
        init.cap.max_recv_sge = 0;
        qp = ibv_create_qp(pd, &init);
        ASSERT_NE(qp, nullptr);
        EXPECT_EQ(qp->srq, srq);
        EXPECT_EQ(init.cap.max_recv_wr, 0U) << "a QP on an SRQ has no receive queue of its own";
    }
    connect(a_, a[0].qp, b_, qps[0]);
    connect(b_, qps[0], a_, a[0].qp);
    connect(a_, a[1].qp, b_, qps[1]);
    connect(b_, qps[1], a_, a[1].qp);

    // Receive i lands at 64 * i of buf and completes as 200 + i; on `qp`, its own queue.
    const auto post_receive = [&](std::uint32_t i, ibv_qp* qp = nullptr) {
        ibv_sge sge{.addr = reinterpret_cast<std::uintptr_t>(buf.data()) + 64U * i,
                    .length = 64,
                    .lkey = mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = 200U + i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        const int error =
            qp == nullptr ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);
        EXPECT_EQ(bad, error == 0 ? nullptr : &wr);
        return error;
    };
    constexpr std::uint32_t posted = 8;
    for (std::uint32_t i = 0; i < posted; ++i) {
        ASSERT_EQ(post_receive(i), 0);
    }
    EXPECT_EQ(post_receive(posted, qps[0]), EINVAL) << "a QP on an SRQ";
    ibv_srq_attr attr{};
    attr.srq_limit = 6;
    ASSERT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), 0);
    attr.srq_limit = srq_init.attr.max_wr + 1;
    EXPECT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), EINVAL);
    attr.max_wr = posted - 1;
    EXPECT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), EINVAL) << "below what it holds";
    ASSERT_EQ(ibv_query_srq(srq, &attr), 0);
    EXPECT_EQ(attr.srq_limit, 6U);
    EXPECT_EQ(attr.max_wr, srq_init.attr.max_wr);
    EXPECT_EQ(ibv_destroy_srq(srq), EBUSY);
    make_nonblocking(b_);

    // A SEND from each QP in turn: the SRQ's WRs are taken in order, whichever QP it came on.
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    const auto send = [&](int n) {
        Side& from = a[n % 2];
        std::snprintf(from.buf.data(), 16, "send %d", n);
        ibv_sge sge{.addr = reinterpret_cast<std::uintptr_t>(from.buf.data()),
                    .length = 16,
                    .lkey = from.mr->lkey};
        ibv_send_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        ibv_send_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_send(from.qp, &wr, &bad), 0);
        ibv_wc wc{};
        while (ibv_poll_cq(cq, 1, &wc) == 0) {
            ASSERT_LT(std::chrono::steady_clock::now(), deadline)
                << "SEND " << n << " not received";
        }
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc.wr_id, 200U + n);
        EXPECT_EQ(wc.qp_num, qps[n % 2]->qp_num);
        EXPECT_EQ(wc.byte_len, 16U);
        EXPECT_EQ(std::string(buf.data() + 64U * n), "send " + std::to_string(n));
    };
    for (int n = 0; n < 3; ++n) {
        send(n);
    }
    // 5 left, below the limit of 6: one event, and the SRQ is disarmed.
    ibv_async_event limit{};
    ASSERT_TRUE(next_event(b_, limit, 5000ms)) << "no SRQ limit event";
    EXPECT_EQ(limit.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
    EXPECT_EQ(limit.element.srq, srq);
    ASSERT_EQ(ibv_query_srq(srq, &attr), 0);
    EXPECT_EQ(attr.srq_limit, 0U);
    send(3);
    ibv_async_event again{};
    EXPECT_FALSE(next_event(b_, again, 300ms)) << "the limit event raised twice";

    // Resized with 4 WRs still in it: those are taken first, then the ones posted after.
    EXPECT_NE(dev.device_cap_flags & IBV_DEVICE_SRQ_RESIZE, 0U);
    const std::uint32_t resized = srq_init.attr.max_wr * 2;
    attr.max_wr = resized;
    ASSERT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), 0);
    ASSERT_EQ(ibv_query_srq(srq, &attr), 0);
    EXPECT_EQ(attr.max_wr, resized);
    // Both at once: the new limit is checked against the new size, and a refusal changes nothing.
    attr.max_wr = srq_init.attr.max_wr;
    attr.srq_limit = srq_init.attr.max_wr + 1;
    EXPECT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), EINVAL);
    ASSERT_EQ(ibv_query_srq(srq, &attr), 0);
    EXPECT_EQ(attr.max_wr, resized);
    EXPECT_EQ(attr.srq_limit, 0U);
    attr.max_wr = resized;
    attr.srq_limit = 2;
    ASSERT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), 0);
    ASSERT_EQ(ibv_query_srq(srq, &attr), 0);
    EXPECT_EQ(attr.srq_limit, 2U);
    const std::uint32_t held = posted - 4;
    for (std::uint32_t i = posted; i < posted + resized - held + 1; ++i) {
        const bool fits = i < posted + resized - held;
        ASSERT_EQ(post_receive(i), fits ? 0 : ENOMEM) << "receive " << i;
    }
    for (std::uint32_t n = 4; n < posted + resized - held; ++n) {
        send(static_cast<int>(n));
    }

    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(ibv_destroy_qp(qps[i]), 0);
        free_side(a[i]);
    }
    auto destroyed = std::async(std::launch::async, [&] { return ibv_destroy_srq(srq); });
    EXPECT_EQ(destroyed.wait_for(200ms), std::future_status::timeout);
    ibv_ack_async_event(&limit);
    if (destroyed.wait_for(10s) != std::future_status::ready) {
        // The future's destructor would wait for the stuck destroy: fail now instead of hanging.
        ADD_FAILURE() << "ibv_destroy_srq still waits after the event was acknowledged";
        std::_Exit(1);
    }
    EXPECT_EQ(destroyed.get(), 0);

    // A basic SRQ through the extended verb; XRC is refused with one line, not silently.
    ibv_srq_init_attr_ex ex{};
    ex.attr = {.max_wr = 8, .max_sge = 1, .srq_limit = 0};
    ex.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
    ex.pd = pd;
    ex.srq_type = IBV_SRQT_BASIC;
    ibv_srq* basic = ibv_create_srq_ex(b_, &ex);
    ASSERT_NE(basic, nullptr);
    EXPECT_EQ(ibv_destroy_srq(basic), 0);
    ex.comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    ex.srq_type = IBV_SRQT_XRC;
    errno = 0;
    EXPECT_EQ(ibv_create_srq_ex(b_, &ex), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

} // namespace

namespace {

// Verbs are thread-safe: threads of one program, on one context or on two contexts of the same
// device, register and deregister memory and make, connect and destroy QPs at the same time, as a
// storage target accepting connections while it registers buffers does. Each object ends as made;
// nothing is lost, doubled or crashed.
TEST_F(VerbsProgram, ControlVerbsFromManyThreadsOnOneDevice) {
    ibv_device** list = ibv_get_device_list(nullptr);
    ASSERT_NE(list, nullptr);
    std::vector<ibv_context*> more; // two more contexts on a_'s device
    for (int i = 0; list[i] != nullptr; ++i) {
        if (std::string(ibv_get_device_name(list[i])) == "rdma_swroce0") {
            more = {ibv_open_device(list[i]), ibv_open_device(list[i])};
        }
    }
    ibv_free_device_list(list);
    const std::unique_ptr<std::vector<ibv_context*>, void (*)(std::vector<ibv_context*>*)> closer(
        &more, [](std::vector<ibv_context*>* contexts) {
            for (ibv_context* ctx : *contexts) {
                if (ctx != nullptr) {
                    EXPECT_EQ(ibv_close_device(ctx), 0);
                }
            }
        });
    ASSERT_EQ(more.size(), 2U);
    ASSERT_NE(more[0], nullptr);
    ASSERT_NE(more[1], nullptr);
    constexpr int rounds = 5000;
    std::mutex live_mutex;
    std::set<std::uint32_t> live_qpns; // of the QPs alive now, across every thread
    const auto churn = [&live_mutex, &live_qpns](ibv_context* ctx, bool memory) {
        int failures = 0;
        ibv_pd* pd = ibv_alloc_pd(ctx);
        ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
        std::vector<char> buf(8192);
        // The first failure ends the run: a broken device should not be asked 5000 times.
        for (int i = 0; i < rounds && failures == 0 && pd != nullptr && cq != nullptr; ++i) {
            if (memory) {
                ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
                failures += mr == nullptr || ibv_dereg_mr(mr) != 0 ? 1 : 0;
                continue;
            }
            ibv_qp_init_attr init = small_qp(cq);
            ibv_qp* qp = ibv_create_qp(pd, &init);
            if (qp == nullptr) {
                ++failures;
                continue;
            }
            {
                const std::lock_guard lock(live_mutex);
                failures += live_qpns.insert(qp->qp_num).second ? 0 : 1000; // a QPN given twice
            }
            ibv_qp_attr attr{};
            attr.qp_state = IBV_QPS_INIT;
            attr.port_num = 1;
            failures += ibv_modify_qp(qp, &attr,
                                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS) != 0
                            ? 1
                            : 0;
            ibv_qp_init_attr got{};
            failures +=
                ibv_query_qp(qp, &attr, IBV_QP_STATE, &got) != 0 || attr.qp_state != IBV_QPS_INIT
                    ? 1
                    : 0;
            {
                const std::lock_guard lock(live_mutex);
                live_qpns.erase(qp->qp_num);
            }
            failures += ibv_destroy_qp(qp) != 0 ? 1 : 0;
        }
        failures += pd == nullptr || cq == nullptr ? 1 : 0;
        failures += cq != nullptr && ibv_destroy_cq(cq) != 0 ? 1 : 0;
        failures += pd != nullptr && ibv_dealloc_pd(pd) != 0 ? 1 : 0;
        return failures;
    };
    std::vector<std::future<int>> threads;
    for (ibv_context* ctx : {a_, more[0], more[1]}) {
        threads.push_back(std::async(std::launch::async, churn, ctx, false));
    }
    for (ibv_context* ctx : {a_, more[0]}) {
        threads.push_back(std::async(std::launch::async, churn, ctx, true));
    }
    for (std::future<int>& t : threads) {
        EXPECT_EQ(t.get(), 0);
    }
}

// progress=poll: the thread polling a CQ drives queue group 0, so a QP created from another
// thread waits for that thread's next poll. The waiter lets go of the device's control lock
// between its own polls: the polling thread may register memory meanwhile, then poll, and both
// finish, instead of the polling thread waiting on the lock for the waiter's 10 s timeout.
TEST_F(VerbsProgram, AVerbWaitingForThePollingThreadLetsItMakeItsOwn) {
    ibv_device** list = ibv_get_device_list(nullptr);
    ASSERT_NE(list, nullptr);
    ibv_context* ctx = nullptr;
    for (int i = 0; list[i] != nullptr; ++i) {
        if (std::string(ibv_get_device_name(list[i])) == "rdma_swroce2") {
            ctx = ibv_open_device(list[i]);
        }
    }
    ibv_free_device_list(list);
    ASSERT_NE(ctx, nullptr);
    ibv_pd* pd = ibv_alloc_pd(ctx);
    ibv_cq* driving = ibv_create_cq(ctx, 16, nullptr, nullptr, 0); // the poller's
    ASSERT_NE(pd, nullptr);
    ASSERT_NE(driving, nullptr);
    // 1: the poller owns group 0; 2: a create is on its way; 3: the main thread is done.
    std::atomic<int> phase{0};
    std::vector<char> buf(4096);
    std::thread poller([&] {
        ibv_wc wc{};
        (void)ibv_poll_cq(driving, 1, &wc); // claims the group
        phase = 1;
        while (phase.load() != 2) {
            (void)ibv_poll_cq(driving, 1, &wc);
        }
        std::this_thread::sleep_for(20ms); // the create is waiting for this thread now
        ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
        EXPECT_NE(mr, nullptr);
        while (phase.load() != 3) {
            (void)ibv_poll_cq(driving, 1, &wc);
        }
        EXPECT_EQ(ibv_dereg_mr(mr), 0);
        EXPECT_EQ(ibv_destroy_cq(driving), 0); // its owner's: no wait
    });
    while (phase.load() != 1) {
        std::this_thread::yield();
    }
    ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
    ibv_qp_init_attr init = small_qp(cq);
    phase = 2;
    const auto start = std::chrono::steady_clock::now();
    ibv_qp* qp = ibv_create_qp(pd, &init);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_NE(qp, nullptr);
    EXPECT_LT(took, 2s) << "the create waited for a poller that waited on the create's lock";
    if (qp != nullptr) {
        EXPECT_EQ(ibv_destroy_qp(qp), 0);
    }
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    phase = 3;
    poller.join();
    EXPECT_EQ(ibv_dealloc_pd(pd), 0);
    EXPECT_EQ(ibv_close_device(ctx), 0);
}

} // namespace
