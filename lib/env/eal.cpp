#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <prdma/build_config.hpp>
#include <prdma/eal.hpp>
#include <prdma/format.hpp>

#include "env_log.hpp"
#include "exit_cleanup.hpp"

namespace prdma {

namespace {

enum class EalState : int { never_started, running, cleaned_up };

// One EAL per process, whatever the number of Eal handles; control path only.
std::atomic<EalState> g_eal_state{EalState::never_started};

bool has_option(const std::vector<std::string>& args,
                std::initializer_list<std::string_view> names) {
    return std::any_of(args.begin(), args.end(), [&](const std::string& arg) {
        return std::any_of(names.begin(), names.end(), [&](std::string_view name) {
            // "--opt" and "--opt=value"; a short option "-a" also matches "-a0000:01:00.0".
            if (arg == name) {
                return true;
            }
            if (name.starts_with("--")) {
                return arg.starts_with(std::string(name) + "=");
            }
            return name.size() == 2 && arg.starts_with(name);
        });
    });
}

std::vector<std::string> split_words(std::string_view text) {
    std::vector<std::string> words;
    std::istringstream stream{std::string(text)};
    for (std::string word; stream >> word;) {
        words.push_back(word);
    }
    return words;
}

} // namespace

std::size_t free_hugepage_bytes(const std::string& sysfs_root) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(sysfs_root) / "kernel/mm/hugepages";
    std::error_code ec;
    std::size_t total = 0;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        // Directory names are "hugepages-<size>kB".
        const std::string name = entry.path().filename().string();
        const auto dash = name.find('-');
        if (dash == std::string::npos) {
            continue;
        }
        const std::size_t size_kb = std::strtoull(name.c_str() + dash + 1, nullptr, 10);
        std::ifstream free_file(entry.path() / "free_hugepages");
        std::size_t free_pages = 0;
        if (free_file >> free_pages) {
            total += free_pages * size_kb * 1024;
        }
    }
    return total;
}

std::vector<std::string> compose_eal_args(const EalOptions& options) {
    std::vector<std::string> args{options.program_name};
    args.insert(args.end(), options.args.begin(), options.args.end());
    const auto& given = options.args;
    const bool fall_back = options.allow_no_huge_fallback && !has_option(given, {"--no-huge"}) &&
                           free_hugepage_bytes(options.sysfs_root) == 0;

    for (const std::string& def : split_words(PRDMA_DEFAULT_EAL_ARGS)) {
        // --no-huge implies legacy memory, which DPDK refuses together with --in-memory;
        // --no-shconf keeps the "no runtime files" half of it.
        if (def == "--in-memory" &&
            (fall_back || has_option(given, {"--no-huge", "--in-memory", "--proc-type",
                                             "--no-shconf", "--huge-dir"}))) {
            if (fall_back && !has_option(given, {"--no-shconf", "--proc-type"})) {
                args.emplace_back("--no-shconf");
            }
            continue;
        }
        if (def == "--no-pci" &&
            has_option(given, {"--no-pci", "-a", "--allow", "-b", "--block"})) {
            continue;
        }
        if (def.starts_with("--iova-mode") && has_option(given, {"--iova-mode"})) {
            continue;
        }
        args.push_back(def);
    }
    if (!has_option(given, {"--file-prefix"})) {
        args.push_back(strformat("--file-prefix=prdma_%d", static_cast<int>(::getpid())));
    }
    if (fall_back) {
        args.emplace_back("--no-huge");
        if (!has_option(given, {"-m", "--socket-mem"})) {
            args.emplace_back("-m");
            args.push_back(std::to_string(options.no_huge_memory_mb));
        }
    }
    return args;
}

namespace {

Result<int> init_eal(std::vector<std::string>& args) {
    EalState expected = EalState::never_started;
    if (!g_eal_state.compare_exchange_strong(expected, EalState::running)) {
        if (expected == EalState::running) {
            return Error(StatusCode::busy, "EAL is already running in this process");
        }
        return Error(StatusCode::not_supported,
                     "EAL was cleaned up in this process and DPDK cannot start it again");
    }
    // A killed memif server's socket would make its port fail to probe.
    env::remove_dead_memif_sockets(args);
    // rte_eal_init permutes argv, so it gets its own array of pointers into our strings.
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& arg : args) {
        argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    const int consumed = rte_eal_init(static_cast<int>(args.size()), argv.data());
    if (consumed < 0) {
        const int err = rte_errno;
        std::string joined;
        for (const auto& arg : args) {
            joined += (joined.empty() ? "" : " ") + arg;
        }
        // A failed rte_eal_init cannot be retried either (DPDK keeps it "already called").
        g_eal_state = EalState::cleaned_up;
        return Error(
            err == EALREADY ? StatusCode::busy : StatusCode::internal,
            strformat("rte_eal_init failed: %s (args: %s)", rte_strerror(err), joined.c_str()));
    }
    return consumed;
}

// The runtime directory of the prefix prdma made up (prdma_<pid>), which belongs to this process
// alone; empty with a prefix of the caller's.
std::string own_runtime_dir(const std::vector<std::string>& args) {
    const std::string own_prefix = strformat("prdma_%d", static_cast<int>(::getpid()));
    if (std::find(args.begin(), args.end(), "--file-prefix=" + own_prefix) == args.end()) {
        return {};
    }
    const std::filesystem::path dir = rte_eal_get_runtime_dir();
    return dir.filename() == own_prefix ? dir.string() : std::string{};
}

// DPDK 22.11 leaves the runtime directory behind, at every exit; a process killed before
// Eal::cleanup leaves its memif listener's socket too. What dead processes left goes now, and a
// signal handler takes this one's with it if it dies of SIGINT, SIGTERM or SIGHUP.
void arm_exit_cleanup(const std::vector<std::string>& args) {
    const std::filesystem::path base =
        std::filesystem::path(rte_eal_get_runtime_dir()).parent_path();
    if (const std::size_t swept = env::sweep_dead_runtime_dirs(base); swept > 0) {
        PRDMA_LOG(INFO, prdma_logtype_env, "env",
                  "removed %zu runtime directories of prdma processes that no longer exist in %s",
                  swept, base.c_str());
    }
    env::arm_exit_cleanup(own_runtime_dir(args));
}

// rte_eal_cleanup, then the runtime directory DPDK leaves behind (when it is prdma's own).
int cleanup_eal(const std::vector<std::string>& args) {
    env::stop_following_ports();
    const std::string runtime_dir = own_runtime_dir(args);
    const int rc = rte_eal_cleanup();
    if (!runtime_dir.empty()) {
        std::error_code ignored; // a directory someone else removed is as good as removed
        std::filesystem::remove_all(runtime_dir, ignored);
    }
    env::disarm_exit_cleanup();
    return rc;
}

bool is_hugepage_backed(const std::vector<std::string>& args) {
    return !has_option(args, {"--no-huge"});
}

std::vector<std::string> vdev_names() {
    std::vector<std::string> names;
    rte_dev_iterator it{};
    rte_device* dev = nullptr;
    RTE_DEV_FOREACH(dev, "bus=vdev", &it) {
        names.emplace_back(rte_dev_name(dev));
    }
    return names;
}

rte_device* find_vdev(const std::string& name) {
    rte_dev_iterator it{};
    rte_device* dev = nullptr;
    RTE_DEV_FOREACH(dev, "bus=vdev", &it) {
        if (name == rte_dev_name(dev)) {
            return dev;
        }
    }
    return nullptr;
}

// rte_eal_cleanup removes virtual devices in the order they were created, so a device built on
// another one (--vdev=net_memif0 --vdev=rdma_swroce0,port=net_memif0) sees its port removed
// first: the started port refuses to close ("Cannot close started device"), and the device then
// stops it with the port's driver already gone. Removing the newest first takes each user down
// before what it uses, as a stack is torn down.
void remove_vdevs_newest_first() {
    const std::vector<std::string> names = vdev_names();
    for (auto name = names.rbegin(); name != names.rend(); ++name) {
        // Looked up again: a driver's remove may have taken other devices with it.
        rte_device* dev = find_vdev(*name);
        if (dev == nullptr || !rte_dev_is_probed(dev)) {
            continue;
        }
        if (const int rc = rte_dev_remove(dev); rc != 0) {
            PRDMA_LOG(WARNING, prdma_logtype_env, "env",
                      "removing %s before EAL cleanup failed: %s; EAL cleanup tries again",
                      name->c_str(), rte_strerror(-rc));
        }
    }
}

} // namespace

Eal::Eal(std::vector<std::string> args, bool hugepage_backed)
    : args_(std::move(args)), hugepage_backed_(hugepage_backed), owns_(true) {}

Result<Eal> Eal::start(const EalOptions& options) {
    std::vector<std::string> args = compose_eal_args(options);
    if (!is_hugepage_backed(args) && !has_option(options.args, {"--no-huge"})) {
        PRDMA_LOG(WARNING, prdma_logtype_env, "env",
                  "no free hugepages: starting EAL with --no-huge (reserve some with "
                  "usertools/prdma-hugepages reserve)");
    }
    std::vector<std::string> for_eal = args;
    auto consumed = init_eal(for_eal);
    if (!consumed) {
        return consumed.error();
    }
    if (static_cast<std::size_t>(consumed.value()) + 1 < args.size()) {
        cleanup_eal(args);
        g_eal_state = EalState::cleaned_up;
        return Error(StatusCode::invalid_parameter,
                     strformat("EAL left %zu non-EAL arguments unparsed, starting with '%s'",
                               args.size() - static_cast<std::size_t>(consumed.value()) - 1,
                               args[static_cast<std::size_t>(consumed.value()) + 1].c_str()));
    }
    PRDMA_LOG(DEBUG, prdma_logtype_env, "env", "EAL started with %zu arguments", args.size());
    arm_exit_cleanup(args);
    const bool hugepages = is_hugepage_backed(args);
    return Eal(std::move(args), hugepages);
}

Result<Eal> Eal::start_from_argv(int argc, char** argv, int* consumed) {
    // EAL arguments end at "--" (DPDK convention); everything after belongs to the application.
    EalOptions options;
    options.program_name = argc > 0 ? argv[0] : "prdma";
    int eal_end = 1;
    while (eal_end < argc && std::string_view(argv[eal_end]) != "--") {
        options.args.emplace_back(argv[eal_end]);
        ++eal_end;
    }
    std::vector<std::string> args = compose_eal_args(options);
    std::vector<std::string> for_eal = args;
    auto result = init_eal(for_eal);
    if (!result) {
        return result.error();
    }
    arm_exit_cleanup(args);
    // Report consumption in the caller's argv: its EAL arguments plus the "--" separator.
    *consumed = eal_end < argc ? eal_end + 1 : eal_end;
    const bool hugepages = is_hugepage_backed(args);
    return Eal(std::move(args), hugepages);
}

Eal::Eal(Eal&& other) noexcept
    : args_(std::move(other.args_)), hugepage_backed_(other.hugepage_backed_),
      owns_(std::exchange(other.owns_, false)) {}

Eal& Eal::operator=(Eal&& other) noexcept {
    if (this != &other) {
        (void)cleanup();
        args_ = std::move(other.args_);
        hugepage_backed_ = other.hugepage_backed_;
        owns_ = std::exchange(other.owns_, false);
    }
    return *this;
}

Eal::~Eal() {
    (void)cleanup();
}

Status Eal::cleanup() {
    if (!owns_) {
        return {};
    }
    owns_ = false;
    g_eal_state = EalState::cleaned_up;
    remove_vdevs_newest_first();
    const int rc = cleanup_eal(args_);
    if (rc != 0) {
        return Error(StatusCode::internal,
                     strformat("rte_eal_cleanup failed: %s", rte_strerror(-rc)));
    }
    return {};
}

void Eal::stop_for_exit() {
    if (!std::exchange(owns_, false)) {
        return;
    }
    g_eal_state = EalState::cleaned_up;
    remove_vdevs_newest_first();
    env::stop_following_ports();
    if (const std::string runtime_dir = own_runtime_dir(args_); !runtime_dir.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(runtime_dir, ignored);
    }
    env::disarm_exit_cleanup();
}

unsigned Eal::main_lcore() const noexcept {
    return rte_get_main_lcore();
}

unsigned Eal::lcore_count() const noexcept {
    return rte_lcore_count();
}

} // namespace prdma
