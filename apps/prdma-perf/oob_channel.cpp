#include "oob_channel.hpp"

#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace prdma::perf {

namespace {

using Clock = std::chrono::steady_clock;

Error system_error(const std::string& what) {
    return {StatusCode::internal, what + ": " + std::strerror(errno)};
}

void set_nodelay(int fd) {
    const int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

} // namespace

Result<OobChannel> OobChannel::accept(std::uint16_t port, std::chrono::milliseconds timeout) {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) {
        return system_error("socket");
    }
    const int one = 1;
    (void)::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listener, 1) != 0) {
        Error error = system_error("cannot listen on TCP port " + std::to_string(port));
        ::close(listener);
        return error;
    }
    pollfd waiting{listener, POLLIN, 0};
    const int ready = ::poll(&waiting, 1, static_cast<int>(timeout.count()));
    if (ready <= 0) {
        ::close(listener);
        return Error(StatusCode::not_connected, "no client connected to TCP port " +
                                                    std::to_string(port) + " within " +
                                                    std::to_string(timeout.count() / 1000) + " s");
    }
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(listener);
    if (fd < 0) {
        return system_error("accept");
    }
    set_nodelay(fd);
    return OobChannel(fd, false);
}

Result<OobChannel> OobChannel::connect(const std::string& host, std::uint16_t port,
                                       std::chrono::milliseconds timeout) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (rc != 0) {
        return Error(StatusCode::invalid_parameter,
                     "cannot resolve server '" + host + "': " + ::gai_strerror(rc));
    }
    const auto deadline = Clock::now() + timeout;
    int last_errno = 0;
    for (;;) {
        for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
            const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) {
                continue;
            }
            if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                ::freeaddrinfo(found);
                set_nodelay(fd);
                return OobChannel(fd, true);
            }
            last_errno = errno;
            ::close(fd);
        }
        if (Clock::now() >= deadline) {
            break;
        }
        ::usleep(50'000);
    }
    ::freeaddrinfo(found);
    return Error(StatusCode::not_connected, "couldn't connect to " + host + ":" + service + ": " +
                                                std::strerror(last_errno) + " (waited " +
                                                std::to_string(timeout.count() / 1000) + " s)");
}

OobChannel::OobChannel(OobChannel&& other) noexcept
    : fd_(other.fd_), client_(other.client_), progress_(std::move(other.progress_)),
      timeout_(other.timeout_) {
    other.fd_ = -1;
}

OobChannel& OobChannel::operator=(OobChannel&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = other.fd_;
        client_ = other.client_;
        progress_ = std::move(other.progress_);
        timeout_ = other.timeout_;
        other.fd_ = -1;
    }
    return *this;
}

OobChannel::~OobChannel() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

Status OobChannel::write_all(const void* data, std::size_t size) const {
    const auto* bytes = static_cast<const char*>(data);
    for (std::size_t done = 0; done < size;) {
        const ssize_t n = ::send(fd_, bytes + done, size - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return system_error("the peer's TCP connection failed while sending");
        }
        done += static_cast<std::size_t>(n);
    }
    return {};
}

Status OobChannel::read_all(void* data, std::size_t size) {
    auto* bytes = static_cast<char*>(data);
    const auto deadline = Clock::now() + timeout_;
    std::uint64_t spins = 0;
    for (std::size_t done = 0; done < size;) {
        // Without a device to drive, sleep in poll(); with one, look at the socket only every
        // so often so the engine keeps most of the core.
        if (!progress_) {
            pollfd waiting{fd_, POLLIN, 0};
            (void)::poll(&waiting, 1, 100);
        } else if (++spins % 256 != 0) {
            progress_();
            continue;
        }
        const ssize_t n = ::recv(fd_, bytes + done, size - done, MSG_DONTWAIT);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            continue;
        }
        if (n == 0) {
            return Error(StatusCode::not_connected, "the peer closed the TCP connection (after " +
                                                        std::to_string(done) + " of " +
                                                        std::to_string(size) + " bytes)");
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return system_error("the peer's TCP connection failed while receiving");
        }
        if (Clock::now() > deadline) {
            return Error(StatusCode::not_connected,
                         "the peer sent nothing for " + std::to_string(timeout_.count() / 1000) +
                             " s (waiting for " + std::to_string(size) + " bytes)");
        }
    }
    return {};
}

Status OobChannel::exchange(const void* mine, void* theirs, std::size_t size) {
    if (client_) {
        if (Status s = write_all(mine, size); !s.ok()) {
            return s;
        }
        return read_all(theirs, size);
    }
    if (Status s = read_all(theirs, size); !s.ok()) {
        return s;
    }
    return write_all(mine, size);
}

OobChannel::Peek OobChannel::peek() const {
    char byte = 0;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) {
        return Peek::data;
    }
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ? Peek::closed
                                                                                 : Peek::nothing;
}

Status OobChannel::finish() {
    (void)::shutdown(fd_, SHUT_WR);
    char sink[64];
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    std::uint64_t spins = 0;
    for (;;) {
        if (progress_ && ++spins % 256 != 0) {
            progress_();
            continue;
        }
        if (!progress_) {
            pollfd waiting{fd_, POLLIN, 0};
            (void)::poll(&waiting, 1, 100);
        }
        const ssize_t n = ::recv(fd_, sink, sizeof(sink), MSG_DONTWAIT);
        if (n == 0) {
            return {};
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return {}; // reset: the peer is gone either way
        }
        if (Clock::now() > deadline) {
            return Error(StatusCode::not_connected, "the peer did not close the TCP connection");
        }
    }
}

} // namespace prdma::perf
