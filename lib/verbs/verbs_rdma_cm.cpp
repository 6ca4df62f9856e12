// librdmacm (perftest's -R, rping) is out of scope: it connects through the kernel's RDMA CM,
// which a machine running prdma does not have. Its entry points are taken here so that a program
// that asks for it hears why, in one line, instead of a bare failure from the kernel interface.
#include <cerrno>

#include "verbs_shim.hpp"

namespace {
constexpr const char* why = "rdma_cm is not supported by libprdma-verbs (there is no kernel RDMA "
                            "CM); exchange the connection out of band instead (perftest without "
                            "-R, ibv_rc_pingpong)";
} // namespace

extern "C" {

struct rdma_event_channel;
struct rdma_cm_id;
// librdmacm's (rdma/rdma_cma.h, not installed with libibverbs-dev).
rdma_event_channel* rdma_create_event_channel();
int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, int port_space);

rdma_event_channel* rdma_create_event_channel() {
    prdma::verbs::refuse("rdma_create_event_channel", EOPNOTSUPP, why);
    return nullptr;
}

int rdma_create_id(rdma_event_channel*, rdma_cm_id** id, void*, int) {
    if (id != nullptr) {
        *id = nullptr;
    }
    prdma::verbs::refuse("rdma_create_id", EOPNOTSUPP, why);
    return -1;
}

} // extern "C"
