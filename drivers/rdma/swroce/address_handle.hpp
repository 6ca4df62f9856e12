// An swroce address handle: where a UD QP's datagrams go. Made on the control path; a UD post
// copies its headers into the WQE (ud.cpp), so nothing on the data path holds an AH after the
// post returns. Internal to the driver.
#pragma once

#include <atomic>
#include <cstdint>

#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/roce/packet.hpp>

namespace prdma::swroce {

// Address handles one device holds: each is a header template (~100 bytes) the control path
// allocates, so an application that leaks them meets a limit, not the heap's end.
inline constexpr std::uint32_t max_ahs = 65536;

struct SwroceAh {
    std::uint32_t pd = 0;
    rdma::AhAttr attr;
    // The datagrams' Ethernet, IP and UDP headers (the UDP source port is the sending QP's,
    // written per frame), once the peer's MAC is known.
    roce::HeaderTemplate headers;
    // Set (release) once `headers` is made; a post reads it (acquire) before it copies them.
    std::atomic<bool> ready{false};
};

} // namespace prdma::swroce
