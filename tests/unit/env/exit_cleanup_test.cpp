// exit_cleanup.hpp's parts that need no EAL: which memif ports leave a socket file, which socket
// files are dead, and which runtime directories a sweep may remove.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "exit_cleanup.hpp"

namespace prdma::env {
namespace {

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "prdma-exit-XXXXXX").string();
        path_ = ::mkdtemp(pattern.data());
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

// A unix socket bound to `path`; listening (live) while the object lives.
class BoundSocket {
public:
    explicit BoundSocket(const fs::path& path) : fd_(::socket(AF_UNIX, SOCK_SEQPACKET, 0)) {
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        const std::string name = path.string();
        std::memcpy(addr.sun_path, name.c_str(), name.size() + 1);
        EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
        EXPECT_EQ(::listen(fd_, 1), 0);
    }
    ~BoundSocket() { ::close(fd_); }
    BoundSocket(const BoundSocket&) = delete;
    BoundSocket& operator=(const BoundSocket&) = delete;
    [[nodiscard]] int fd() const { return fd_; }

private:
    int fd_;
};

// What a SIGKILLed server leaves: the file of a socket no process has any more.
void make_dead_socket(const fs::path& path) {
    const BoundSocket gone(path);
}

// A pid no process can have: above the kernel's limit.
pid_t impossible_pid() {
    std::ifstream file("/proc/sys/kernel/pid_max");
    pid_t max = 4194304;
    file >> max;
    return max + 1;
}

TEST(MemifListenerFile, OnlyServersWithAFileSocket) {
    EXPECT_EQ(memif_listener_file("role=server,socket=/tmp/a.sock,socket-abstract=no,id=0"),
              "/tmp/a.sock");
    EXPECT_EQ(memif_listener_file("role=server,socket-abstract=no"), "/run/memif.sock");
    EXPECT_EQ(memif_listener_file("role=client,socket=/tmp/a.sock,socket-abstract=no"),
              std::nullopt);
    // DPDK 22.11's defaults: a client, and an abstract socket, which has no file.
    EXPECT_EQ(memif_listener_file("socket=/tmp/a.sock,socket-abstract=no"), std::nullopt);
    EXPECT_EQ(memif_listener_file("role=server,socket=/tmp/a.sock"), std::nullopt);
    EXPECT_EQ(memif_listener_file(""), std::nullopt);
    // kvargs handlers see every value; the last one stays.
    EXPECT_EQ(memif_listener_file("role=server,socket=/tmp/a,socket-abstract=no,socket=/tmp/b"),
              "/tmp/b");
}

TEST(MemifListenerFile, FromEalArguments) {
    const std::vector<std::string> args{
        "-l",
        "0",
        "--vdev=net_memif0,role=server,socket=/tmp/a.sock,socket-abstract=no",
        "--vdev",
        "eth_memif1,role=server,socket=/tmp/b.sock,socket-abstract=no",
        "--vdev=net_memif2,role=client,socket=/tmp/c.sock,socket-abstract=no",
        "--vdev=net_ring0,role=server,socket=/tmp/d.sock,socket-abstract=no",
        "--vdev=net_memif3",
        "--vdev"};
    EXPECT_EQ(memif_listener_files(args), (std::vector<std::string>{"/tmp/a.sock", "/tmp/b.sock"}));
    EXPECT_TRUE(is_memif_device("net_memif12"));
    EXPECT_FALSE(is_memif_device("net_ring0"));
}

TEST(DeadSocket, OnlyAFileNothingIsBoundTo) {
    const TempDir tmp;
    make_dead_socket(tmp.path() / "dead.sock");
    EXPECT_TRUE(is_dead_socket(tmp.path() / "dead.sock"));

    const BoundSocket live(tmp.path() / "live.sock");
    EXPECT_FALSE(is_dead_socket(tmp.path() / "live.sock"));
    // The probe never reached the listener: no connection waits to be accepted.
    pollfd pending{live.fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&pending, 1, 0), 0);

    std::ofstream(tmp.path() / "plain") << "x";
    EXPECT_FALSE(is_dead_socket(tmp.path() / "plain"));
    EXPECT_FALSE(is_dead_socket(tmp.path() / "missing"));
}

TEST(DeadSocket, RemovedBeforeMemifBindsItAgain) {
    const TempDir tmp;
    make_dead_socket(tmp.path() / "dead.sock");
    const BoundSocket live(tmp.path() / "live.sock");
    remove_dead_memif_sockets({"--vdev=net_memif0,role=server,socket-abstract=no,socket=" +
                                   (tmp.path() / "dead.sock").string(),
                               "--vdev=net_memif1,role=server,socket-abstract=no,socket=" +
                                   (tmp.path() / "live.sock").string()});
    EXPECT_FALSE(fs::exists(fs::symlink_status(tmp.path() / "dead.sock")));
    EXPECT_TRUE(fs::exists(tmp.path() / "live.sock"));
}

TEST(SweepRuntimeDirs, OnlyPrdmaDirectoriesOfDeadProcesses) {
    const TempDir base;
    const std::string dead = std::to_string(impossible_pid());
    const fs::path gone = base.path() / ("prdma_" + dead);
    fs::create_directories(gone / "sub");
    std::ofstream(gone / "config") << "x";
    make_dead_socket(gone / "dpdk_telemetry.v2");
    // Alive: this process; a dead pid with a live socket (another PID namespace); other prefixes,
    // names that are not prdma_<pid>, and files.
    const std::vector<std::string> kept{"prdma_" + std::to_string(::getpid()),
                                        "prdma_" + dead + "0", // another dead pid, with a socket
                                        "memif_floor_" + dead,
                                        "prdma_x" + dead,
                                        "prdma_0" + dead,
                                        "prdma_"};
    for (const std::string& name : kept) {
        fs::create_directory(base.path() / name);
    }
    const BoundSocket live(base.path() / ("prdma_" + dead + "0") / "mp_socket");
    std::ofstream(base.path() / ("prdma_" + dead + "1")) << "a file, not a directory";

    EXPECT_EQ(sweep_dead_runtime_dirs(base.path()), 1U);
    EXPECT_FALSE(fs::exists(gone));
    for (const std::string& name : kept) {
        EXPECT_TRUE(fs::is_directory(base.path() / name)) << name;
    }
    EXPECT_TRUE(fs::is_regular_file(base.path() / ("prdma_" + dead + "1")));
    EXPECT_EQ(sweep_dead_runtime_dirs(base.path() / "missing"), 0U);
}

} // namespace
} // namespace prdma::env
