// libprdma-verbs: libibverbs' exported verbs answered by prdma, for unmodified verbs binaries
// loaded with LD_PRELOAD. libibverbs' inline verbs (ibv_query_port, ibv_query_device_ex, and the
// data path) dispatch through the context, so a context here is a real struct verbs_context
// (abi_compat extended, every op set) that prdma's objects sit behind. Internal to the shim.
#pragma once

#include <array>
#include <atomic>
#include <infiniband/verbs.h>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <prdma/eal.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

namespace prdma::verbs {

// A prdma device as libibverbs lists it. `device` is what the application holds; it is first so
// a struct ibv_device* leads back here.
struct ShimDevice {
    ibv_device device{};
    rdma::DeviceId id{};
    std::uint64_t node_guid = 0; // network order, as ibv_get_device_guid returns it
    // Control verbs run one at a time per device, whichever of its contexts they are on: the
    // contexts share the device's control path, and verbs promise thread safety. A verb holds it
    // to its end, but for the sleeps between its polls while it waits for the device
    // (await_control).
    std::mutex control_mutex;
};
// So an ibv_device* leads back to its ShimDevice.
static_assert(std::is_standard_layout_v<ShimDevice>);

// The process's EAL and devices, brought up once from the environment (PRDMA_EAL_ARGS) by the
// first verb that needs them.
struct ShimState {
    std::optional<Eal> eal;
    std::vector<std::unique_ptr<ShimDevice>> devices;
    std::string error; // why there are no devices: said once, on the first verb that asks
};
ShimState& shim_state();

struct AsyncEvents; // a context's asynchronous events (verbs_async.cpp)

// An open device. `vctx` first: libibverbs finds it from the ibv_context inside it.
struct ShimContext {
    explicit ShimContext(rdma::Context opened) : context(std::move(opened)) {}
    ShimContext(const ShimContext&) = delete;
    ShimContext& operator=(const ShimContext&) = delete;
    ShimContext(ShimContext&&) = delete;
    ShimContext& operator=(ShimContext&&) = delete;
    ~ShimContext();

    verbs_context vctx{};
    ShimDevice* device = nullptr;
    rdma::Context context;
    // The device's (ShimDevice::control_mutex): every control call on this context holds it.
    [[nodiscard]] std::mutex& control_mutex() const { return device->control_mutex; }
    std::uint64_t last_request = 0;
    // Under the device's control mutex: the requests threads wait for in await_control, and the
    // completions of those that one waiter's poll took for another. (Behind a pointer: the
    // containers would cost ShimContext its standard layout.)
    struct Waits {
        std::set<std::uint64_t> awaited;
        std::map<std::uint64_t, rdma::ControlCompletion> finished;
    };
    std::shared_ptr<Waits> waits = std::make_shared<Waits>();
    AsyncEvents* async = nullptr; // kept (keep()) from open until the context goes
    // The objects made on it that are alive, and closed_bit once ibv_close_device ran: a context
    // closed with objects left lives until the last is destroyed, because their verbs (and the
    // inline data path, through this context's ops) still reach it.
    std::atomic<std::uint32_t> lifetime{0};
    static constexpr std::uint32_t closed_bit = 1U << 31;
};
// So the verbs_context and the ShimContext are pointer-interconvertible.
static_assert(std::is_standard_layout_v<ShimContext>);
ShimContext& shim_context(ibv_context* context);
// An object made on `shim`: false, after one line naming `verb` (errno EBADF), when the context
// has been closed. release_context when the object is destroyed; close_context at close.
bool hold_context(ShimContext& shim, const char* verb);
void release_context(ShimContext& shim);
void close_context(ShimContext& shim);
// hold_context for an object being made, released unless the object is made (kept()).
class ContextHold {
public:
    ContextHold(ShimContext& shim, const char* verb)
        : shim_(hold_context(shim, verb) ? &shim : nullptr) {}
    ContextHold(const ContextHold&) = delete;
    ContextHold& operator=(const ContextHold&) = delete;
    ContextHold(ContextHold&&) = delete;
    ContextHold& operator=(ContextHold&&) = delete;
    ~ContextHold() {
        if (shim_ != nullptr) {
            release_context(*shim_);
        }
    }
    explicit operator bool() const { return shim_ != nullptr; }
    void keep() { shim_ = nullptr; } // the object now holds it
private:
    ShimContext* shim_;
};

// The verbs objects: each begins with the public struct libibverbs' inline verbs read, and holds
// the prdma handle behind it.
struct ShimPd {
    ibv_pd pd{};
    rdma::ProtectionDomain handle;
};
struct MrParts {
    rdma::MemoryRegionHandle handle;
    std::vector<std::uintptr_t> pinned; // the runs of pinned pages it uses (verbs_memory.cpp)
};
// What is not standard layout (CompletionQueue and QueuePair derive from a queue handle with
// members; a vector, a unique_ptr under some standard libraries) sits behind a pointer to what
// keep() owns.
struct ShimMr {
    ibv_mr mr{};
    MrParts* parts = nullptr;
};
// Where a poll gathers prdma's completions before converting them: one per CQ, as a CQ is polled
// by one thread at a time. [next, held) were polled but not yet handed out: what an extended CQ's
// reader left (verbs_cq_ex.cpp), handed out first by either kind of poll.
struct CompletionRoom {
    std::array<rdma::WorkCompletion, 32> wcs;
    std::uint16_t next = 0;
    std::uint16_t held = 0;
    bool reading = false; // an extended poll is on wcs[next]
};
// Every CQ is an extended one (ibv_cq_ex begins as ibv_cq does), so either kind of poll works on
// it; ibv_create_cq hands out its ibv_cq.
struct ShimCq {
    ibv_cq_ex cq{};
    rdma::CompletionQueue* handle = nullptr;
    CompletionRoom* room = nullptr; // kept with the handle
    int event_fd = -1;              // its eventfd in its channel's epoll set (verbs_events.cpp)
};
struct WrBatch; // work requests built between ibv_wr_start and ibv_wr_complete (verbs_qp_ex.cpp)
// Every QP is an ibv_qp_ex (its ibv_qp first), as libibverbs' own; ibv_qp_to_qp_ex hands it out
// for a QP created with send_ops_flags, which has a batch.
struct ShimQp {
    ibv_qp_ex qpx{};
    rdma::QueuePair* handle = nullptr;
    rdma::QpCaps caps;
    bool signal_all = false;
    bool ud = false;          // IBV_QPT_UD: its sends name an address handle
    WrBatch* batch = nullptr; // kept with the handle
};
// A shared receive queue (verbs_srq.cpp); its QPs name it in their ibv_qp's srq.
struct ShimSrq {
    ibv_srq srq{};
    rdma::SharedReceiveQueue* handle = nullptr; // kept
    // Verbs lets any thread post to an SRQ (several threads refilling one pool is what SRQs are
    // for); prdma's post_srq_recv takes one producer at a time.
    std::mutex post_mutex;
};
// An address handle (verbs_ah.cpp); a UD send names it in wr.ud.ah.
struct ShimAh {
    ibv_ah ah{};
    rdma::AddressHandle* handle = nullptr; // kept
    void* wr_handle = nullptr;             // what prdma's UD WR names it by
};
static_assert(std::is_standard_layout_v<ShimPd> && std::is_standard_layout_v<ShimMr> &&
              std::is_standard_layout_v<ShimCq> && std::is_standard_layout_v<ShimQp> &&
              std::is_standard_layout_v<ShimSrq> && std::is_standard_layout_v<ShimAh>);

// Owns the parts shim objects point at, by address, until release_kept (verbs_env.cpp).
void keep_erased(const void* key, std::shared_ptr<void> owner);
void release_kept(const void* key);
template <typename T>
T* keep(std::unique_ptr<T> owned) {
    T* raw = owned.get();
    keep_erased(raw, std::shared_ptr<void>(std::move(owned)));
    return raw;
}

// Pins the pages [begin, end) that are not DPDK memory as external memory, one run per stretch
// not pinned yet; appends the runs used to `used` (verbs_memory.cpp). unpin_pages drops them.
Status pin_pages(std::uintptr_t begin, std::uintptr_t end, std::vector<std::uintptr_t>& used);
void unpin_pages(const std::vector<std::uintptr_t>& used);
// Whether every page of [begin, end) (page-aligned) is mapped: verbs answers EFAULT otherwise.
bool pages_mapped(std::uintptr_t begin, std::uintptr_t end);
// The shim object a public struct begins (what the shim handed out, never anything else).
template <typename Shim, typename Public>
Shim& shim_of(Public* object) {
    return *reinterpret_cast<Shim*>(object); // NOLINT: the first member of a standard layout
}

// When `status` (of the control call made with `request_id`) is pending, keeps the device going
// (Context::poll_control) until the request completes: a verbs call returns when its work is
// done. The caller holds the device's control mutex; it is let go between two polls, so the
// thread whose poll drives the queue group the request waits on (progress=poll) may make its own
// control calls meanwhile, and a completion another waiter's poll takes is left for it.
Status await_control(ShimContext& shim, std::uint64_t request_id, Status status);
std::uint64_t next_request(ShimContext& shim);
// A create (of a CQ or QP, with `request_id`) that pends is waited for: its handle is ready after.
template <typename Handle>
Status await_created(ShimContext& shim, std::uint64_t request_id, const Result<Handle>& made) {
    if (!made.ok()) {
        return made.error();
    }
    return made.value().ready()
               ? Status{}
               : await_control(shim, request_id, Error(StatusCode::pending, "the create pends"));
}

// ibv_access_flags as prdma's (verbs_objects.cpp): not_supported for a flag prdma lacks.
Result<rdma::AccessFlags> access_of(unsigned access);

// The errno a verb returns for a prdma status.
int errno_of(StatusCode code);

// One line on stderr naming the verb, then errno; what a verb that fails returns is the caller's.
void refuse(const char* verb, int error, const std::string& why);

// Destroys `handle` (a CompletionQueue, a QueuePair) and waits until it is gone: 0, or after one
// line naming `verb`, its error number.
// `gone` runs once it is destroyed, still under the control mutex.
template <typename Handle, typename Gone>
int destroy_and_wait(const char* verb, ShimContext& context, Handle& handle, Gone&& gone) {
    const std::lock_guard lock(context.control_mutex());
    const std::uint64_t request = next_request(context);
    const Status status = await_control(context, request, handle.destroy(request));
    if (status.ok()) {
        gone();
        return 0;
    }
    refuse(verb, errno_of(status.error().code()), status.error().message());
    return errno;
}

// Port `port_num`'s GID `index` (all RoCE v2); EINVAL when there is none.
int query_gid_entry(ibv_context* context, std::uint32_t port_num, std::uint32_t index,
                    ibv_gid_entry& out);
// libibverbs' private GID type (driver.h's ibv_gid_type_sysfs), which ibv_devinfo prints.
inline constexpr int gid_type_sysfs_roce_v2 = 1;

// Asynchronous events (verbs_async.cpp): started at open (the context's async_fd and its watcher
// thread), stopped when the context goes. A QP's (an SRQ's) events are handed out from create
// to destroy. watch and forget run under the device's control mutex with the create and the
// destroy, so a number given out again meanwhile is never mistaken for the old object's; forget
// returns the events handed out, which wait_*_acks then waits to see acknowledged, as verbs'
// destroy does.
Status start_async_events(ShimContext& shim);
void stop_async_events(ShimContext& shim);
void watch_qp_events(ShimContext& shim, ibv_qp* qp);
std::uint32_t forget_qp_events(ShimContext& shim, ibv_qp* qp);
void wait_qp_acks(ibv_qp* qp, std::uint32_t reported);
void watch_srq_events(ShimContext& shim, ibv_srq* srq);
std::uint32_t forget_srq_events(ShimContext& shim, ibv_srq* srq);
void wait_srq_acks(ibv_srq* srq, std::uint32_t reported);

// A CQ for ibv_create_cq and ibv_create_cq_ex (verbs_objects.cpp): null after one line naming
// `verb`. The extended verb adds its readers (verbs_cq_ex.cpp).
ShimCq* make_cq(const char* verb, ibv_context* context, int cqe, void* cq_context,
                ibv_comp_channel* channel);
ibv_cq_ex* create_cq_ex_op(ibv_context* context, ibv_cq_init_attr_ex* attr);
// A QP for ibv_create_qp and ibv_create_qp_ex (verbs_qp.cpp): null after one line naming `verb`;
// init->cap is set to what the QP got. The extended verb adds the ibv_wr_* builders
// (verbs_qp_ex.cpp).
ShimQp* create_qp(const char* verb, ibv_pd* pd, ibv_qp_init_attr* init);
ibv_qp* create_qp_ex_op(ibv_context* context, ibv_qp_init_attr_ex* attr);
// The verb's error number for a post prdma refused (verbs_datapath.cpp).
int post_errno(StatusCode reason);
// prdma's completion in ibv_wc's form (verbs_datapath.cpp), and its parts.
void to_verbs_wc(const rdma::WorkCompletion& in, ibv_wc& out);
ibv_wc_opcode wc_opcode(rdma::WcOpcode opcode);
ibv_wc_status wc_status(rdma::WcStatus status);

// Sets the query entries of verbs_context (query_port, query_device_ex).
void set_context_query_ops(ShimContext& shim);
// Completion events (verbs_events.cpp): a channel is an epoll set of its CQs' eventfds.
// attach_to_channel makes the CQ's eventfd and adds it; detach_from_channel undoes it.
Result<int> attach_to_channel(ibv_comp_channel* channel, ibv_cq* cq);
void detach_from_channel(ibv_cq* cq, int event_fd);
int req_notify_cq_op(ibv_cq* cq, int solicited_only);

// The data path ops (verbs_datapath.cpp): post_send, post_recv, post_srq_recv, poll_cq.
void set_data_path_ops(ShimContext& shim);
// Fills the context's ops (ibv_context_ops and the extended ops of verbs_context).
void set_context_ops(ShimContext& shim);

} // namespace prdma::verbs

// Exported by libibverbs (IBVERBS_PRIVATE) but declared only in its driver.h.
extern "C" int ibv_query_gid_type(ibv_context* context, std::uint8_t port_num, unsigned int index,
                                  int* type);
