// A process that dies of a signal after Eal::start leaves neither its runtime directory nor the
// socket files of its memif servers, those of the EAL command line and those hotplugged later;
// a child it forked without exec and that dies of a signal leaves them alone (they are not the
// child's); the application's own dispositions are kept, and Eal::cleanup restores the defaults.
// One EAL per process: the killed process is this binary run again for ChildDiesOfSigterm.
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <rte_eal.h>

#include <prdma/eal.hpp>

namespace prdma {
namespace {

namespace fs = std::filesystem;

constexpr const char* child_dir_variable = "PRDMA_EAL_SIGNAL_DIR";

void (*handler_of(int signo))(int) {
    struct sigaction action {};
    sigaction(signo, nullptr, &action);
    return action.sa_handler;
}

extern "C" void application_handler(int /*signo*/) {}

// A socket file at `path` as another process would leave it: bound, then closed.
void make_foreign_socket(const fs::path& path) {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
}

bool on_disk(const fs::path& path) {
    return fs::exists(fs::symlink_status(path));
}

std::string server_devargs(const fs::path& socket) {
    return "role=server,socket=" + socket.string() + ",socket-abstract=no";
}

// Exits with a distinct code where the parent's checks would be meaningless.
void require(bool condition, int code) {
    if (!condition) {
        std::_Exit(code);
    }
}

// Run by KilledProcessLeavesNothing in a process of its own; ends in SIGTERM.
TEST(EalSignal, ChildDiesOfSigterm) {
    const char* dir = std::getenv(child_dir_variable);
    if (dir == nullptr) {
        GTEST_SKIP() << "the child of KilledProcessLeavesNothing";
    }
    const fs::path tmp = dir;
    EalOptions options;
    options.args = {"-l", "0", "--log-level=pmd.net.memif:crit",
                    "--vdev=net_memif0," + server_devargs(tmp / "a.sock")};
    auto eal = Eal::start(options);
    require(eal.ok(), 10);
    const fs::path runtime_dir = rte_eal_get_runtime_dir();
    std::ofstream(tmp / "runtime_dir") << runtime_dir.string();

    // Hotplugged after start: one server stays, one goes, and the path of the one that went is
    // taken by a socket that is not this process's.
    require(rte_vdev_init("net_memif1", server_devargs(tmp / "b.sock").c_str()) == 0, 11);
    require(rte_vdev_init("net_memif2", server_devargs(tmp / "c.sock").c_str()) == 0, 12);
    require(rte_vdev_uninit("net_memif2") == 0, 13);
    make_foreign_socket(tmp / "c.sock");

    const pid_t forked = ::fork();
    if (forked == 0) {
        std::raise(SIGTERM);
        std::_Exit(0);
    }
    int status = 0;
    require(::waitpid(forked, &status, 0) == forked && WIFSIGNALED(status) &&
                WTERMSIG(status) == SIGTERM,
            14);
    require(on_disk(runtime_dir) && on_disk(tmp / "a.sock") && on_disk(tmp / "b.sock"), 15);

    std::raise(SIGTERM);
    std::_Exit(16);
}

TEST(EalSignal, KilledProcessLeavesNothing) {
    if (std::getenv(child_dir_variable) != nullptr) {
        GTEST_SKIP();
    }
    char pattern[] = "/tmp/prdma-eal-signal-XXXXXX";
    const fs::path tmp = ::mkdtemp(pattern);
    const pid_t child = ::fork(); // before this process starts EAL
    if (child == 0) {
        ::setenv(child_dir_variable, tmp.c_str(), 1);
        ::execl("/proc/self/exe", "integration-env-eal-signal",
                "--gtest_filter=EalSignal.ChildDiesOfSigterm", nullptr);
        std::_Exit(127);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
    std::string runtime_dir;
    std::ifstream(tmp / "runtime_dir") >> runtime_dir;
    EXPECT_EQ(fs::path(runtime_dir).filename(), "prdma_" + std::to_string(child));
    EXPECT_FALSE(on_disk(runtime_dir));
    EXPECT_FALSE(on_disk(tmp / "a.sock"));
    EXPECT_FALSE(on_disk(tmp / "b.sock"));
    EXPECT_TRUE(on_disk(tmp / "c.sock"));
    fs::remove_all(tmp);
}

TEST(EalSignal, ApplicationDispositionsAreKept) {
    if (std::getenv(child_dir_variable) != nullptr) {
        GTEST_SKIP();
    }
    std::signal(SIGHUP, SIG_IGN); // as nohup does
    auto eal = Eal::start({.args = {"-l", "0"}});
    ASSERT_TRUE(eal) << eal.error().message();
    EXPECT_NE(handler_of(SIGINT), SIG_DFL);
    EXPECT_NE(handler_of(SIGTERM), SIG_DFL);
    EXPECT_EQ(handler_of(SIGHUP), SIG_IGN);

    std::signal(SIGINT, application_handler); // installed after start
    ASSERT_TRUE(eal.value().cleanup());
    EXPECT_EQ(handler_of(SIGTERM), SIG_DFL);
    EXPECT_EQ(handler_of(SIGINT), &application_handler);
    EXPECT_EQ(handler_of(SIGHUP), SIG_IGN);
}

} // namespace
} // namespace prdma
