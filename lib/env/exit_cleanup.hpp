// What a process leaves in the file system when it exits without Eal::cleanup, and its removal.
//
// A process killed by SIGINT, SIGTERM or SIGHUP skips every destructor, so DPDK never closes its
// memif ports (whose close removes the listener's socket file) and Eal::cleanup never removes the
// runtime directory. A signal handler does both with system calls only; what SIGKILL leaves is
// removed by the next process that needs the socket path, or that starts EAL at all (the dead
// process's runtime directory). Internal to prdma_env; the unit tests use the pure parts.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prdma::env {

// True for a vdev name DPDK's memif driver takes (net_memif0, eth_memif1...).
bool is_memif_device(std::string_view name);

// The socket file a memif port with these devargs ("role=server,socket=/tmp/a.sock,...") listens
// on; none for a client or an abstract socket (DPDK 22.11's defaults, the latter names no file).
std::optional<std::string> memif_listener_file(std::string_view devargs);

// The socket files the memif server ports among these EAL arguments (--vdev=net_memif...) listen
// on.
std::vector<std::string> memif_listener_files(const std::vector<std::string>& eal_args);

// True when `path` is a socket file nothing is bound to, as a killed process leaves it. The probe
// connects with a type no DPDK socket has a listener of, so a live process never sees it.
bool is_dead_socket(const std::string& path);

// DPDK 22.11's memif fails to bind over a dead socket ("Address already in use") and its port is
// then missing; the dead ones among these EAL arguments' listener files go, each with a log line.
void remove_dead_memif_sockets(const std::vector<std::string>& eal_args);

// Removes the prdma_<pid> directories under `runtime_base` (/var/run/dpdk) of processes that no
// longer exist and left no live socket in them; never any other name. Returns how many went.
std::size_t sweep_dead_runtime_dirs(const std::filesystem::path& runtime_base);

// After rte_eal_init: the handlers for SIGINT, SIGTERM and SIGHUP, where the application has
// left them at their default, and the memif listener files of this process's ports (now and
// hotplugged later). `own_runtime_dir` is removed by the handler too; empty when it is not prdma's.
void arm_exit_cleanup(const std::string& own_runtime_dir);

// Before rte_eal_cleanup: stops following the ethdev ports (DPDK frees its callbacks' memory).
void stop_following_ports();

// After Eal::cleanup removed everything: the dispositions found at arm_exit_cleanup come back,
// unless the application has installed its own since.
void disarm_exit_cleanup();

} // namespace prdma::env
