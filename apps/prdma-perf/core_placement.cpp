#include "core_placement.hpp"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>

namespace prdma::perf {

namespace {

// `-x value`, `-xvalue`, `--name value` or `--name=value`: the value, when `args[i]` is that
// option.
std::optional<std::string> option_value(std::span<const std::string> args, std::size_t& i,
                                        std::string_view short_name, std::string_view long_name) {
    const std::string_view arg = args[i];
    for (const std::string_view name : {short_name, long_name}) {
        if (name.empty() || !arg.starts_with(name)) {
            continue;
        }
        const std::string_view rest = arg.substr(name.size());
        if (rest.empty()) {
            return i + 1 < args.size() ? std::optional(args[++i]) : std::nullopt;
        }
        if (name.starts_with("--") && rest.starts_with('=')) {
            return std::string(rest.substr(1));
        }
        if (!name.starts_with("--")) {
            return std::string(rest);
        }
    }
    return std::nullopt;
}

// The PCI address under a kernel interface: /sys/class/net/NAME/device links to the device.
std::optional<std::string> pci_of_interface(std::string_view name) {
    std::error_code error;
    const auto device = std::filesystem::read_symlink(
        std::filesystem::path("/sys/class/net") / name / "device", error);
    if (error) {
        return std::nullopt; // veth, bridge, loopback: no device underneath
    }
    const auto subsystem = std::filesystem::read_symlink(
        std::filesystem::path("/sys/class/net") / name / "device" / "subsystem", error);
    if (error || subsystem.filename() != "pci") {
        return std::nullopt;
    }
    return device.filename().string();
}

// iface=NAME among a vdev's comma-separated arguments.
std::optional<std::string> vdev_interface(std::string_view vdev) {
    std::size_t start = 0;
    while (start < vdev.size()) {
        const std::size_t comma = std::min(vdev.find(',', start), vdev.size());
        const std::string_view item = vdev.substr(start, comma - start);
        if (item.starts_with("iface=")) {
            return std::string(item.substr(6));
        }
        start = comma + 1;
    }
    return std::nullopt;
}

} // namespace

bool has_core_option(std::span<const std::string> eal_args) {
    return std::ranges::any_of(eal_args, [](const std::string& arg) {
        return arg.starts_with("-l") || arg.starts_with("-c") || arg.starts_with("--lcores");
    });
}

std::optional<std::string> port_pci_address(std::span<const std::string> eal_args) {
    for (std::size_t i = 0; i < eal_args.size(); ++i) {
        for (const auto& [short_name, long_name] :
             {std::pair{"-a", "--allow"}, std::pair{"-w", "--pci-whitelist"}}) {
            std::size_t at = i;
            if (auto value = option_value(eal_args, at, short_name, long_name)) {
                return value->substr(0, value->find(',')); // without its devargs
            }
        }
        std::size_t at = i;
        if (auto vdev = option_value(eal_args, at, "", "--vdev")) {
            if (auto iface = vdev_interface(*vdev)) {
                if (auto pci = pci_of_interface(*iface)) {
                    return pci;
                }
            }
        }
    }
    return std::nullopt;
}

unsigned pick_side_core(const Topology& topology, const std::optional<std::string>& pci,
                        bool client) {
    std::vector<unsigned> cpus;
    if (pci) {
        auto near = topology.pick_cpus_near_pci(*pci, 2);
        if (near) {
            cpus = near.value();
        }
    }
    if (cpus.empty()) {
        cpus = topology.pick_cpus(std::nullopt, 2);
    }
    if (cpus.empty()) {
        return 0;
    }
    return client && cpus.size() > 1 ? cpus[1] : cpus[0];
}

Status place_near_port(std::vector<std::string>& eal_args, bool client) {
    if (has_core_option(eal_args)) {
        return {};
    }
    auto topology = Topology::discover();
    if (!topology) {
        return topology.error();
    }
    const unsigned core = pick_side_core(topology.value(), port_pci_address(eal_args), client);
    eal_args.insert(eal_args.begin(), {"-l", std::to_string(core)});
    return {};
}

} // namespace prdma::perf
