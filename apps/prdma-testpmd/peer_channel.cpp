// PeerChannel: a message is a header {kind, index, length} and `length` payload bytes.
#include "peer_channel.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <prdma/format.hpp>

namespace prdma::testpmd {

namespace {

struct Header {
    std::uint32_t magic = 0x50544d44; // "PTMD"
    std::uint32_t kind = 0;
    std::uint32_t index = 0;
    std::uint32_t length = 0;
};

Error os_error(const std::string& what) {
    return {StatusCode::internal, what + ": " + std::strerror(errno)};
}

} // namespace

PeerChannel::~PeerChannel() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

std::string PeerChannel::describe() const {
    return host_.empty() ? strformat("listening on TCP port %u", unsigned{port_})
                         : strformat("connecting to %s:%u", host_.c_str(), unsigned{port_});
}

Status PeerChannel::open() {
    return host_.empty() ? listen_and_accept() : connect_to_host();
}

Status PeerChannel::listen_and_accept() {
    const int server = ::socket(AF_INET6, SOCK_STREAM, 0);
    if (server < 0) {
        return os_error("socket");
    }
    const int on = 1;
    ::setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_port = htons(port_);
    address.sin6_addr = in6addr_any;
    if (::bind(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(server, 1) != 0) {
        const Error error = os_error(strformat("listen on TCP port %u", unsigned{port_}));
        ::close(server);
        return error;
    }
    std::printf("Waiting for the peer on TCP port %u...\n", unsigned{port_});
    pollfd ready{.fd = server, .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, wait_ms) != 1) {
        ::close(server);
        return Error(StatusCode::not_connected,
                     strformat("no peer connected to TCP port %u within %d s", unsigned{port_},
                               wait_ms / 1000));
    }
    fd_ = ::accept(server, nullptr, nullptr);
    ::close(server);
    return fd_ >= 0 ? Status{} : Status{os_error("accept")};
}

Status PeerChannel::connect_to_host() {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    const std::string port = std::to_string(port_);
    if (const int rc = ::getaddrinfo(host_.c_str(), port.c_str(), &hints, &list); rc != 0) {
        return Error(StatusCode::invalid_parameter,
                     strformat("peer %s: %s", host_.c_str(), ::gai_strerror(rc)));
    }
    // The peer may still be starting: try for a minute.
    for (int tries = 0; tries < wait_ms / 100; ++tries) {
        const int fd = ::socket(list->ai_family, SOCK_STREAM, 0);
        if (fd >= 0 && ::connect(fd, list->ai_addr, list->ai_addrlen) == 0) {
            fd_ = fd;
            break;
        }
        if (fd >= 0) {
            ::close(fd);
        }
        ::usleep(100'000);
    }
    ::freeaddrinfo(list);
    if (fd_ < 0) {
        return Error(StatusCode::not_connected,
                     strformat("cannot reach the peer at %s:%u", host_.c_str(), unsigned{port_}));
    }
    return {};
}

Status PeerChannel::write_all(const void* data, std::size_t size) const {
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    while (size > 0) {
        const ssize_t n = ::send(fd_, bytes, size, MSG_NOSIGNAL);
        if (n <= 0) {
            return os_error("sending to the peer");
        }
        bytes += n;
        size -= static_cast<std::size_t>(n);
    }
    return {};
}

Status PeerChannel::read_all(void* data, std::size_t size, int timeout_ms) {
    auto* bytes = static_cast<std::uint8_t*>(data);
    while (size > 0) {
        pollfd ready{.fd = fd_, .events = POLLIN, .revents = 0};
        if (::poll(&ready, 1, timeout_ms) != 1) {
            return Error(StatusCode::not_connected,
                         strformat("the peer did not answer within %d ms", timeout_ms));
        }
        const ssize_t n = ::recv(fd_, bytes, size, 0);
        if (n <= 0) {
            return Error(StatusCode::not_connected, "the peer closed the TCP connection");
        }
        bytes += n;
        size -= static_cast<std::size_t>(n);
    }
    return {};
}

Status PeerChannel::exchange(std::uint32_t kind, std::uint32_t index,
                             std::span<const std::uint8_t> mine, std::span<std::uint8_t> theirs) {
    if (fd_ < 0) {
        if (Status opened = open(); !opened) {
            return opened;
        }
    }
    const Header out{
        .kind = kind, .index = index, .length = static_cast<std::uint32_t>(mine.size())};
    Header in;
    if (Status s = write_all(&out, sizeof(out)); !s) {
        return s;
    }
    if (Status s = write_all(mine.data(), mine.size()); !s) {
        return s;
    }
    if (Status s = read_all(&in, sizeof(in)); !s) {
        return s;
    }
    if (in.magic != out.magic || in.kind != kind || in.index != index ||
        in.length != theirs.size()) {
        return Error(StatusCode::invalid_parameter,
                     strformat("the peer ran another command (kind %u, index %u) than this side "
                               "(kind %u, index %u): run the same command on both sides (a UD QP "
                               "connects to a UD QP only: the same --qp-type on both)",
                               in.kind, in.index, kind, index));
    }
    return read_all(theirs.data(), theirs.size());
}

Status PeerChannel::leave(std::chrono::milliseconds wait) {
    if (fd_ < 0) {
        return {};
    }
    const Header out{.kind = kind_leave, .index = 0, .length = 0};
    if (Status s = write_all(&out, sizeof(out)); !s) {
        return {}; // the peer is gone already
    }
    Header in;
    Status s = read_all(&in, sizeof(in), static_cast<int>(wait.count()));
    if (!s && s.error().message().find("closed") != std::string::npos) {
        return {}; // it left first
    }
    return s;
}

} // namespace prdma::testpmd
