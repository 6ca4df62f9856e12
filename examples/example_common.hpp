// What the examples share, as rdma-core's examples share pingpong.c: stopping on an error with a
// clear message, their common options (-p, -s, -n, the server's host), and the out-of-band TCP
// channel the connection descriptors cross. Header-only and installed beside the examples, so they
// still build from the installed sources with `pkg-config prdma` alone.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <netdb.h>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/status.hpp>

namespace example {

[[noreturn]] inline void fail(const std::string& message) {
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, message.c_str());
    std::exit(1);
}

[[noreturn]] inline void usage_error(const std::string& message) {
    std::fprintf(stderr, "%s: %s (try --help)\n", program_invocation_short_name, message.c_str());
    std::exit(2);
}

template <typename T>
T must(prdma::Result<T> result, const char* what) {
    if (!result) {
        fail(std::string(what) + ": " + result.error().to_string());
    }
    return std::move(result.value());
}

inline void check(const prdma::Status& status, const char* what) {
    if (!status.ok()) {
        fail(std::string(what) + ": " + status.error().to_string());
    }
}

// Waits until the device's port 1 is active (rdma::wait_port_active says why it matters).
inline void wait_port_active(const prdma::rdma::Context& context, std::chrono::seconds limit) {
    (void)must(prdma::rdma::wait_port_active(context, 1, limit), "wait for port 1");
}

// An option's value: a whole number 1..max, or a usage error naming the option.
inline unsigned long number(const char* text, unsigned long max, const char* what) {
    char* end = nullptr;
    errno = 0;
    const unsigned long value = std::strtoul(text, &end, 0);
    if (*text == '\0' || *text == '-' || *end != '\0' || errno != 0 || value == 0 || value > max) {
        usage_error(std::string(what) + " needs a number 1.." + std::to_string(max) + ", not '" +
                    text + "'");
    }
    return value;
}

struct Options {
    std::string port = "18515"; // ibv_rc_pingpong's default
    std::uint32_t size = 4096;
    unsigned iters = 1000;
    std::string server; // empty: this side is the server
};

// EAL options, then `--` and ours: [-p port] [-s size] [-n iters] [server-host]. Called before the
// EAL starts, so a mistake costs no hugepages and no device; -h or --help anywhere prints
// `usage_text` and exits 0.
inline Options parse(int argc, char** argv, Options o, const char* usage_text) {
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "-h" || std::string_view(argv[i]) == "--help") {
            std::fputs(usage_text, stdout);
            std::exit(0);
        }
    }
    // Ours follow `--`, which getopt then takes for the program name.
    int separator = 1;
    while (separator < argc && std::string_view(argv[separator]) != "--") {
        ++separator;
    }
    if (separator == argc) {
        return o;
    }
    const int count = argc - separator;
    char** args = argv + separator;
    static const option long_options[] = {{"port", required_argument, nullptr, 'p'},
                                          {"size", required_argument, nullptr, 's'},
                                          {"iters", required_argument, nullptr, 'n'},
                                          {nullptr, 0, nullptr, 0}};
    optind = 1;
    opterr = 0;
    int c = 0;
    while ((c = getopt_long(count, args, ":p:s:n:", long_options, nullptr)) != -1) {
        switch (c) {
        case 'p':
            o.port = std::to_string(number(optarg, 65535, "-p"));
            break;
        case 's':
            o.size = static_cast<std::uint32_t>(number(optarg, 1UL << 30, "-s"));
            break;
        case 'n':
            o.iters = static_cast<unsigned>(number(optarg, 1'000'000'000, "-n"));
            break;
        case ':':
            usage_error(std::string("option '") + args[optind - 1] + "' needs a value");
        default:
            usage_error(optopt != 0
                            ? std::string("unknown option '-") + static_cast<char>(optopt) + "'"
                            : std::string("unknown option '") + args[optind - 1] + "'");
        }
    }
    if (optind < count) {
        o.server = args[optind++];
    }
    if (optind < count) {
        usage_error(std::string("unexpected argument '") + args[optind] + "'");
    }
    return o;
}

// The out-of-band channel: without a host this side is the server and takes one client on
// `port`; with one it connects, retrying for ten seconds while the server starts its EAL.
inline int tcp_connect(const std::string& host, const std::string& port) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = host.empty() ? AI_PASSIVE : 0;
    addrinfo* list = nullptr;
    if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &list);
        rc != 0) {
        fail(std::string("getaddrinfo: ") + gai_strerror(rc));
    }
    int fd = socket(list->ai_family, SOCK_STREAM, 0);
    if (host.empty()) {
        const int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        if (bind(fd, list->ai_addr, list->ai_addrlen) != 0 || listen(fd, 1) != 0) {
            fail("cannot listen on port " + port + ": " + std::strerror(errno));
        }
        const int peer = accept(fd, nullptr, nullptr);
        close(fd);
        fd = peer;
    } else {
        int tries = 0;
        while (connect(fd, list->ai_addr, list->ai_addrlen) != 0) {
            if (++tries == 100) {
                fail("cannot reach " + host + ":" + port + ": " + std::strerror(errno));
            }
            usleep(100'000);
        }
    }
    freeaddrinfo(list);
    return fd;
}

inline void send_all(int fd, const void* data, std::size_t length) {
    if (write(fd, data, length) != static_cast<ssize_t>(length)) {
        fail("the peer closed the connection");
    }
}

} // namespace example
