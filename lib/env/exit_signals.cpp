// The signal half of exit_cleanup.hpp: what the handler removes is recorded beforehand in static
// storage, because a handler may run in the middle of malloc, a DPDK lock or a log line, and may
// only make system calls and touch lock-free atomics.
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>

#include "env_log.hpp"
#include "exit_cleanup.hpp"

namespace prdma::env {

namespace {

namespace fs = std::filesystem;

enum SlotState : int { slot_free, slot_writing, slot_ready };

// One memif listener of this process. The handler unlinks the path only while it still names the
// socket this process bound (same device and inode): a path another process took over since is
// not ours to remove.
struct ListenerSlot {
    std::atomic<int> state{slot_free};
    std::array<char, RTE_DEV_NAME_MAX_LEN> name{}; // the vdev's, for its DESTROY event
    dev_t device = 0;
    ino_t inode = 0;
    std::array<char, sizeof(sockaddr_un::sun_path)> path{};
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the slots");

constexpr std::size_t max_listeners = 32;
std::array<ListenerSlot, max_listeners> g_listeners;
// Written before the handlers are installed, read-only while they are.
std::array<char, PATH_MAX> g_runtime_dir{};

constexpr std::array<int, 3> handled_signals{SIGINT, SIGTERM, SIGHUP};
std::array<struct sigaction, handled_signals.size()> g_previous{};
std::array<bool, handled_signals.size()> g_installed{};
std::atomic<pid_t> g_owner{0};
std::atomic<bool> g_cleanup_started{false};
std::atomic<bool> g_cleanup_done{false};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "the signal handler reads these");
bool g_following_ports = false;

// Async-signal-safe: empties the directory (of files, and of empty directories: DPDK makes no
// others) with getdents64, a bare system call like read(); rescans because unlinking while
// reading may skip entries.
void remove_entries(int dir) noexcept {
    alignas(dirent64) char buffer[4096];
    for (int pass = 0; pass < 4; ++pass) {
        bool removed = false;
        ::lseek(dir, 0, SEEK_SET);
        for (ssize_t got = 0; (got = ::getdents64(dir, buffer, sizeof(buffer))) > 0;) {
            for (ssize_t offset = 0; offset < got;) {
                const auto* entry = reinterpret_cast<const dirent64*>(buffer + offset);
                offset += entry->d_reclen;
                const char* name = entry->d_name;
                if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) {
                    continue;
                }
                removed |=
                    ::unlinkat(dir, name, 0) == 0 || ::unlinkat(dir, name, AT_REMOVEDIR) == 0;
            }
        }
        if (!removed) {
            return;
        }
    }
}

void remove_runtime_dir() noexcept {
    if (g_runtime_dir[0] == '\0') {
        return;
    }
    const int dir = ::open(g_runtime_dir.data(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) {
        return;
    }
    remove_entries(dir);
    ::close(dir);
    ::rmdir(g_runtime_dir.data());
}

void unlink_listener_files() noexcept {
    for (const ListenerSlot& slot : g_listeners) {
        if (slot.state.load(std::memory_order_acquire) != slot_ready) {
            continue;
        }
        struct stat st {};
        if (::fstatat(AT_FDCWD, slot.path.data(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISSOCK(st.st_mode) && st.st_dev == slot.device && st.st_ino == slot.inode) {
            ::unlink(slot.path.data());
        }
    }
}

void clean_up_once() noexcept {
    if (!g_cleanup_started.exchange(true)) {
        remove_runtime_dir();
        unlink_listener_files();
        g_cleanup_done.store(true);
        return;
    }
    // Another thread took a signal first: the process goes when it has finished (1 s at most).
    const timespec pause{0, 1000000};
    for (int i = 0; i < 1000 && !g_cleanup_done.load(); ++i) {
        ::nanosleep(&pause, nullptr);
    }
}

// Removes what the process leaves, then dies of the same signal with the default action, so its
// parent (a shell, a test, systemd) still sees "killed by SIGTERM".
extern "C" void clean_up_and_reraise(int signo) {
    // A child forked without exec inherits the handler but not the files: they are its parent's.
    if (::getpid() == g_owner.load()) {
        clean_up_once();
    }
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    ::sigaction(signo, &default_action, nullptr);
    // Blocked until the handler returns, then delivered with the default action.
    ::raise(signo);
}

bool is_ours(const struct sigaction& action) {
    return (action.sa_flags & SA_SIGINFO) == 0 && action.sa_handler == clean_up_and_reraise;
}

void install_handlers() {
    for (std::size_t i = 0; i < handled_signals.size(); ++i) {
        struct sigaction current {};
        if (g_installed[i] || ::sigaction(handled_signals[i], nullptr, &current) != 0) {
            continue;
        }
        // A handler of the application's, or SIG_IGN (nohup, a shell's background job), is the
        // application's choice; so is what happens at exit then.
        if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) {
            continue;
        }
        struct sigaction ours {};
        ours.sa_handler = clean_up_and_reraise;
        sigemptyset(&ours.sa_mask);
        for (const int other : handled_signals) {
            sigaddset(&ours.sa_mask, other); // one handler per thread at a time
        }
        g_previous[i] = current;
        g_installed[i] = ::sigaction(handled_signals[i], &ours, nullptr) == 0;
    }
}

// One slot per device: memif ports may share a socket, whose file stays until the last goes.
bool is_recorded(const char* device_name, const struct stat& st) {
    return std::any_of(g_listeners.begin(), g_listeners.end(), [&](const ListenerSlot& slot) {
        return slot.state.load(std::memory_order_acquire) == slot_ready &&
               slot.device == st.st_dev && slot.inode == st.st_ino &&
               std::strcmp(slot.name.data(), device_name) == 0;
    });
}

void record_listener(const char* device_name, const std::string& path, const struct stat& st) {
    for (ListenerSlot& slot : g_listeners) {
        int expected = slot_free;
        if (slot.state.compare_exchange_strong(expected, slot_writing)) {
            slot.device = st.st_dev;
            slot.inode = st.st_ino;
            slot.name.fill('\0');
            std::string_view(device_name).copy(slot.name.data(), slot.name.size() - 1);
            slot.path.fill('\0');
            path.copy(slot.path.data(), slot.path.size() - 1);
            slot.state.store(slot_ready, std::memory_order_release);
            return;
        }
    }
    PRDMA_LOG(WARNING, prdma_logtype_env, "env",
              "more than %zu memif listeners: %s stays behind if a signal ends the process",
              max_listeners, path.c_str());
}

// The listener files of the memif devices on the vdev bus that exist and are not recorded yet.
// The bus, not the ethdev: a port being probed is not valid yet when its NEW event comes.
void follow_memif_listeners() {
    rte_dev_iterator it{};
    rte_device* dev = nullptr;
    RTE_DEV_FOREACH(dev, "bus=vdev", &it) {
        const rte_devargs* devargs = rte_dev_devargs(dev);
        if (!is_memif_device(rte_dev_name(dev)) || devargs == nullptr) {
            continue;
        }
        const auto file = memif_listener_file(devargs->args != nullptr ? devargs->args : "");
        if (!file) {
            continue;
        }
        // A relative path is relative to the working directory memif has just bound it in.
        std::error_code ec;
        const std::string path = fs::absolute(*file, ec).string();
        struct stat st {};
        if (!ec && path.size() < sizeof(sockaddr_un::sun_path) && ::lstat(path.c_str(), &st) == 0 &&
            S_ISSOCK(st.st_mode) && !is_recorded(rte_dev_name(dev), st)) {
            record_listener(rte_dev_name(dev), path, st);
        }
    }
}

// A port going away normally: memif has removed its file, and the slot is free again.
void forget_port(std::uint16_t port) {
    std::array<char, RTE_ETH_NAME_MAX_LEN> name{};
    if (rte_eth_dev_get_name_by_port(port, name.data()) != 0) {
        return;
    }
    for (ListenerSlot& slot : g_listeners) {
        if (slot.state.load(std::memory_order_acquire) == slot_ready &&
            std::strcmp(slot.name.data(), name.data()) == 0) {
            int expected = slot_ready;
            slot.state.compare_exchange_strong(expected, slot_free);
        }
    }
}

int on_port_event(std::uint16_t port, rte_eth_event_type event, void* /*arg*/,
                  void* /*ret_param*/) {
    if (event == RTE_ETH_EVENT_NEW) {
        follow_memif_listeners();
    } else if (event == RTE_ETH_EVENT_DESTROY) {
        forget_port(port);
    }
    return 0;
}

} // namespace

void arm_exit_cleanup(const std::string& own_runtime_dir) {
    g_owner = ::getpid();
    g_runtime_dir.fill('\0');
    if (own_runtime_dir.size() < g_runtime_dir.size()) {
        own_runtime_dir.copy(g_runtime_dir.data(), g_runtime_dir.size() - 1);
    }
    follow_memif_listeners();
    // Ports hotplugged later (rte_vdev_init, rte_dev_probe) and those removed.
    for (const auto event : {RTE_ETH_EVENT_NEW, RTE_ETH_EVENT_DESTROY}) {
        if (rte_eth_dev_callback_register(RTE_ETH_ALL, event, on_port_event, nullptr) != 0) {
            PRDMA_LOG(WARNING, prdma_logtype_env, "env",
                      "cannot follow hotplugged ports: a memif listener created after EAL "
                      "started stays behind if a signal ends the process");
        }
    }
    g_following_ports = true;
    install_handlers();
}

void stop_following_ports() {
    if (std::exchange(g_following_ports, false)) {
        for (const auto event : {RTE_ETH_EVENT_NEW, RTE_ETH_EVENT_DESTROY}) {
            rte_eth_dev_callback_unregister(RTE_ETH_ALL, event, on_port_event, nullptr);
        }
    }
}

void disarm_exit_cleanup() {
    for (std::size_t i = 0; i < handled_signals.size(); ++i) {
        struct sigaction current {};
        if (g_installed[i] && ::sigaction(handled_signals[i], nullptr, &current) == 0 &&
            is_ours(current)) {
            ::sigaction(handled_signals[i], &g_previous[i], nullptr);
        }
        g_installed[i] = false;
    }
}

} // namespace prdma::env
