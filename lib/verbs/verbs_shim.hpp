// libprdma-verbs: libibverbs' exported verbs answered by prdma, for unmodified verbs binaries
// loaded with LD_PRELOAD. libibverbs' inline verbs (ibv_query_port, ibv_query_device_ex, and the
// data path) dispatch through the context, so a context here is a real struct verbs_context
// (abi_compat extended, every op set) that prdma's objects sit behind. Internal to the shim.
#pragma once

#include <infiniband/verbs.h>
#include <memory>
#include <optional>
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
};

// The process's EAL and devices, brought up once from the environment (PRDMA_EAL_ARGS) by the
// first verb that needs them.
struct ShimState {
    std::optional<Eal> eal;
    std::vector<std::unique_ptr<ShimDevice>> devices;
    std::string error; // why there are no devices: said once, on the first verb that asks
};
ShimState& shim_state();

// An open device. `vctx` first: libibverbs finds it from the ibv_context inside it.
struct ShimContext {
    explicit ShimContext(rdma::Context opened) : context(std::move(opened)) {}

    verbs_context vctx{};
    ShimDevice* device = nullptr;
    rdma::Context context;
};
// So the verbs_context and the ShimContext are pointer-interconvertible.
static_assert(std::is_standard_layout_v<ShimContext>);
ShimContext& shim_context(ibv_context* context);

// One line on stderr naming the verb, then errno; what a verb that fails returns is the caller's.
void refuse(const char* verb, int error, const std::string& why);

// Port `port_num`'s GID `index` (all RoCE v2); EINVAL when there is none.
int query_gid_entry(ibv_context* context, std::uint32_t port_num, std::uint32_t index,
                    ibv_gid_entry& out);
// libibverbs' private GID type (driver.h's ibv_gid_type_sysfs), which ibv_devinfo prints.
inline constexpr int gid_type_sysfs_roce_v2 = 1;

// Sets the query entries of verbs_context (query_port, query_device_ex).
void set_context_query_ops(ShimContext& shim);
// Fills the context's ops (ibv_context_ops and the extended ops of verbs_context).
void set_context_ops(ShimContext& shim);

} // namespace prdma::verbs

// Exported by libibverbs (IBVERBS_PRIVATE) but declared only in its driver.h.
extern "C" int ibv_query_gid_type(ibv_context* context, std::uint8_t port_num, unsigned int index,
                                  int* type);
