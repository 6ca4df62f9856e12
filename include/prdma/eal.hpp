// prdma::Eal — starts DPDK's EAL with this framework's defaults and cleans it up (RAII).
//
// EAL can be initialised once per process and never again after rte_eal_cleanup(), so Eal is a
// move-only handle to that one instance: a second start() while one is alive is *busy*, a start()
// after cleanup is *not supported*.
//
// What a run leaves in the file system: cleanup() removes the runtime directory of prdma's own
// file prefix (DPDK 22.11 keeps it); a memif server's socket file goes when its port closes. A
// process killed by SIGINT, SIGTERM or SIGHUP never gets there, so start() installs a handler for
// each of them that the application has left at SIG_DFL: it removes both with system calls only
// and dies of the same signal. A handler (or SIG_IGN) installed before start() is left alone;
// one installed after replaces prdma's, and cleanup() then leaves it in place. SIGKILL cannot be
// caught: the next start() removes a socket file nothing listens on before memif binds its path
// again, and the prdma_<pid> runtime directories of processes that no longer exist.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <prdma/status.hpp>

namespace prdma {

struct EalOptions {
    // argv[0] as EAL sees it; used in its log lines.
    std::string program_name = "prdma";
    // The caller's EAL arguments. A default is added only where the caller has not chosen:
    //   --in-memory       unless --proc-type/--no-shconf/--huge-dir say otherwise
    //   --no-pci          unless -a/--allow/-b/--block name PCI devices
    //   --iova-mode=va    unless --iova-mode is given
    //   --file-prefix=prdma_<pid> unless --file-prefix is given
    std::vector<std::string> args;
    // Without any free hugepage the EAL fails to start; fall back to --no-huge (IOVA = VA, no
    // VFIO DMA) with a warning instead, so a laptop or a CI box without hugepages still runs.
    bool allow_no_huge_fallback = true;
    // Memory for the --no-huge fallback, in MiB.
    unsigned no_huge_memory_mb = 512;
    // Where free hugepages are counted for the fallback decision (tests point it at a fake tree).
    std::string sysfs_root = "/sys";
};

// The argument vector prdma::Eal would pass to rte_eal_init (argv[0] first). Pure: reads the
// free hugepage counts from options.sysfs_root (for the fallback decision) and nothing else.
std::vector<std::string> compose_eal_args(const EalOptions& options);

// Free hugepages of every size the kernel offers, in bytes, summed (0 when none or no sysfs).
std::size_t free_hugepage_bytes(const std::string& sysfs_root = "/sys");

class Eal {
public:
    static Result<Eal> start(const EalOptions& options = {});

    // Starts EAL from an application's argv, as DPDK apps do: returns how many arguments EAL
    // consumed (argv[0] included) so the caller parses the rest. Defaults are added as above.
    static Result<Eal> start_from_argv(int argc, char** argv, int* consumed);

    Eal(Eal&& other) noexcept;
    Eal& operator=(Eal&& other) noexcept;
    Eal(const Eal&) = delete;
    Eal& operator=(const Eal&) = delete;
    ~Eal();

    // The arguments actually passed to rte_eal_init.
    [[nodiscard]] const std::vector<std::string>& args() const noexcept { return args_; }
    // False when the --no-huge fallback (or the caller) left EAL without hugepages.
    [[nodiscard]] bool hugepage_backed() const noexcept { return hugepage_backed_; }
    [[nodiscard]] unsigned main_lcore() const noexcept;
    [[nodiscard]] unsigned lcore_count() const noexcept;

    // Stops EAL now (as the destructor would) and reports rte_eal_cleanup's result.
    Status cleanup();
    // For an exit handler, where the process ends next: removes the devices (newest first, so
    // peers see their ports close) and the runtime directory, and leaves EAL's memory and threads
    // to the exit. DPDK 22.11's interrupt thread is never stopped by rte_eal_cleanup and may still
    // be finishing a memif peer's disconnect when the cleanup unmaps the memory it reads.
    void stop_for_exit();

private:
    Eal(std::vector<std::string> args, bool hugepage_backed);

    std::vector<std::string> args_;
    bool hugepage_backed_ = false;
    bool owns_ = false;
};

} // namespace prdma
