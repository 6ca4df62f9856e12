#include "exit_cleanup.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>

#include "env_log.hpp"

namespace prdma::env {

namespace {

namespace fs = std::filesystem;

// The last value of `key` in DPDK kvargs ("k=v,k=v"), as a driver's rte_kvargs_process sees it.
std::optional<std::string_view> kvarg(std::string_view devargs, std::string_view key) {
    std::optional<std::string_view> value;
    while (!devargs.empty()) {
        const std::size_t comma = devargs.find(',');
        const std::string_view pair = devargs.substr(0, comma);
        if (pair.size() > key.size() && pair.starts_with(key) && pair[key.size()] == '=') {
            value = pair.substr(key.size() + 1);
        }
        devargs.remove_prefix(comma == std::string_view::npos ? devargs.size() : comma + 1);
    }
    return value;
}

class Fd {
public:
    explicit Fd(int fd) noexcept : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    [[nodiscard]] int get() const noexcept { return fd_; }

private:
    int fd_;
};

enum class SocketState { not_a_socket, dead, live };

SocketState probe_socket(const std::string& path) {
    struct stat st {};
    sockaddr_un addr{};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
        path.size() >= sizeof(addr.sun_path)) {
        return SocketState::not_a_socket;
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    // A datagram connect sends nothing; to a stream or seqpacket listener (memif, telemetry) it
    // is refused with EPROTOTYPE before any connection exists. Only an unbound file says
    // ECONNREFUSED.
    const Fd probe(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (probe.get() < 0) {
        return SocketState::live; // cannot tell: keep it
    }
    const int rc = ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    const int err = errno;
    return rc != 0 && err == ECONNREFUSED ? SocketState::dead : SocketState::live;
}

// prdma_<pid> as compose_eal_args names it; nothing else is prdma's to remove.
std::optional<pid_t> prdma_prefix_pid(std::string_view name) {
    constexpr std::string_view prefix = "prdma_";
    if (!name.starts_with(prefix) || name.size() == prefix.size()) {
        return std::nullopt;
    }
    const std::string_view digits = name.substr(prefix.size());
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc{} || end != digits.data() + digits.size() || pid <= 0 ||
        digits.front() == '0') {
        return std::nullopt;
    }
    return pid;
}

bool process_exists(pid_t pid) {
    return ::kill(pid, 0) == 0 || errno == EPERM;
}

// A process of another PID namespace sharing /var/run/dpdk is invisible to kill(); a socket it
// still has bound in the directory (telemetry, multi-process) shows it alive.
bool has_live_socket(const fs::path& dir) {
    std::error_code ec;
    return std::ranges::any_of(fs::directory_iterator(dir, ec), [](const fs::directory_entry& e) {
        return probe_socket(e.path().string()) == SocketState::live;
    });
}

} // namespace

bool is_memif_device(std::string_view name) {
    // The vdev bus hands a device to the driver whose name (or alias) starts its name.
    return name.starts_with("net_memif") || name.starts_with("eth_memif");
}

std::optional<std::string> memif_listener_file(std::string_view devargs) {
    // DPDK 22.11's memif: a client and an abstract socket unless told otherwise; it looks for
    // "server" (or the older "master") anywhere in the role's value.
    const std::string_view role = kvarg(devargs, "role").value_or("client");
    if (role.find("server") == std::string_view::npos &&
        role.find("master") == std::string_view::npos) {
        return std::nullopt;
    }
    if (kvarg(devargs, "socket-abstract").value_or("yes") != "no") {
        return std::nullopt;
    }
    return std::string(kvarg(devargs, "socket").value_or("/run/memif.sock"));
}

std::vector<std::string> memif_listener_files(const std::vector<std::string>& eal_args) {
    std::vector<std::string> files;
    for (std::size_t i = 0; i < eal_args.size(); ++i) {
        std::string_view device;
        if (eal_args[i].starts_with("--vdev=")) {
            device = std::string_view{eal_args[i]}.substr(std::strlen("--vdev="));
        } else if (eal_args[i] == "--vdev" && i + 1 < eal_args.size()) {
            device = eal_args[++i];
        }
        const std::size_t comma = device.find(',');
        if (!is_memif_device(device.substr(0, comma))) {
            continue;
        }
        const std::string_view devargs =
            comma == std::string_view::npos ? std::string_view{} : device.substr(comma + 1);
        if (auto file = memif_listener_file(devargs)) {
            files.push_back(std::move(*file));
        }
    }
    return files;
}

bool is_dead_socket(const std::string& path) {
    return probe_socket(path) == SocketState::dead;
}

void remove_dead_memif_sockets(const std::vector<std::string>& eal_args) {
    for (const std::string& file : memif_listener_files(eal_args)) {
        if (is_dead_socket(file) && ::unlink(file.c_str()) == 0) {
            PRDMA_LOG(NOTICE, prdma_logtype_env, "env",
                      "removed %s: a memif socket nothing listens on, left by a server that was "
                      "killed before it could close its port",
                      file.c_str());
        }
    }
}

std::size_t sweep_dead_runtime_dirs(const fs::path& runtime_base) {
    std::vector<fs::path> dead;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(runtime_base, ec)) {
        const auto pid = prdma_prefix_pid(entry.path().filename().string());
        if (pid && entry.is_directory(ec) && !entry.is_symlink(ec) && !process_exists(*pid) &&
            !has_live_socket(entry.path())) {
            dead.push_back(entry.path());
        }
    }
    std::size_t removed = 0;
    for (const fs::path& dir : dead) {
        std::error_code ignored; // another process sweeping at the same time got there first
        removed += fs::remove_all(dir, ignored) > 0 ? 1 : 0;
    }
    return removed;
}

} // namespace prdma::env
