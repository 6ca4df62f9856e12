// The `set` commands: engine, mix, burst, size, inline, signal-every (taken at the next `start`,
// as testpmd's), and swroce's fault rates, which need every lcore out of its bursts.
#include <cstdio>
#include <cstdlib>

#include <prdma/format.hpp>
#include <prdma/swroce/swroce.hpp>

#include "session.hpp"
#include "stats_report.hpp"

namespace prdma::testpmd {

namespace {

std::optional<EngineKind> mix_kind(std::string_view name) {
    for (const EngineKind kind : {EngineKind::write, EngineKind::read, EngineKind::send,
                                  EngineKind::atomic, EngineKind::rxonly}) {
        if (name == engine_kind_name(kind)) {
            return kind;
        }
    }
    return std::nullopt;
}

double* fault_field(swroce::FaultProbabilities& rates, std::string_view kind) {
    if (kind == "drop") {
        return &rates.drop;
    }
    if (kind == "reorder") {
        return &rates.reorder;
    }
    if (kind == "dup" || kind == "duplicate") {
        return &rates.duplicate;
    }
    if (kind == "corrupt") {
        return &rates.corrupt;
    }
    return kind == "delay" ? &rates.delay : nullptr;
}

} // namespace

Status Session::set_engine(std::string_view name) {
    const FwdEngine* engine = find_engine(name);
    if (engine == nullptr) {
        std::string known;
        for (const FwdEngine* e : fwd_engines()) {
            known += std::string(known.empty() ? "" : ", ") + std::string(e->name);
        }
        return Error(StatusCode::invalid_parameter,
                     strformat("no engine '%.*s'; engines: %s", static_cast<int>(name.size()),
                               name.data(), known.c_str()));
    }
    if (Status ok = check_stopped("set fwd"); !ok) {
        return ok;
    }
    if (const char* misfit = engine_misfit(*engine, config_.ud); misfit != nullptr) {
        return Error(StatusCode::invalid_parameter,
                     strformat("set fwd %.*s: %s", static_cast<int>(engine->name.size()),
                               engine->name.data(), misfit));
    }
    config_.engine = engine;
    std::printf("Set %.*s packet forwarding mode\n", static_cast<int>(engine->name.size()),
                engine->name.data());
    return {};
}

Status Session::set_mix(std::string_view list) {
    if (Status ok = check_stopped("set mix"); !ok) {
        return ok;
    }
    std::vector<EngineKind> mix;
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const std::string_view name = list.substr(0, comma);
        const std::optional<EngineKind> kind = mix_kind(name);
        if (!kind) {
            return Error(StatusCode::invalid_parameter,
                         strformat("'%.*s' cannot be mixed: write, read, send, atomic or rxonly",
                                   static_cast<int>(name.size()), name.data()));
        }
        mix.push_back(*kind);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    if (mix.empty()) {
        return Error(StatusCode::invalid_parameter, "set mix needs a list, e.g. write,read,send");
    }
    if (Status parked = park_all(); !parked) {
        return parked;
    }
    mix_ = mix;
    for (auto& lcore : lcores_) {
        for (unsigned slot = 0; slot < lcore->stream_count; ++slot) {
            Stream& stream = lcore->streams[slot];
            stream.kind = mix_[stream.qp_index % mix_.size()];
        }
    }
    resume_all();
    std::printf("Mix set: QP n runs the (n mod %zu)-th of the list\n", mix_.size());
    return {};
}

Status Session::set_fwd_value(std::string_view what, std::uint64_t value) {
    if (Status ok = check_stopped("this setting"); !ok) {
        return ok;
    }
    const auto out_of = [&](std::uint64_t low, std::uint64_t high) -> Status {
        return Error(StatusCode::invalid_parameter,
                     strformat("set %.*s %llu: the value must be in [%llu, %llu]",
                               static_cast<int>(what.size()), what.data(),
                               static_cast<unsigned long long>(value),
                               static_cast<unsigned long long>(low),
                               static_cast<unsigned long long>(high)));
    };
    FwdConfig& fwd = config_.fwd;
    if (what == "burst") {
        if (value < 1 || value > max_burst) {
            return out_of(1, max_burst);
        }
        fwd.burst = static_cast<std::uint32_t>(value);
    } else if (what == "size") {
        if (value < 1 || value > max_message) {
            return out_of(1, max_message);
        }
        fwd.size = static_cast<std::uint32_t>(value);
    } else if (what == "inline") {
        if (value > max_inline_) {
            return out_of(0, max_inline_);
        }
        fwd.inline_size = static_cast<std::uint32_t>(value);
    } else if (what == "signal-every") {
        if (value < 1 || value > 256) {
            return out_of(1, 256);
        }
        fwd.signal_every = static_cast<std::uint32_t>(value);
    } else if (what == "qps") {
        return set_qps(static_cast<unsigned>(value));
    }
    std::printf("%.*s set to %llu\n", static_cast<int>(what.size()), what.data(),
                static_cast<unsigned long long>(value));
    return {};
}

Status Session::set_fault(std::string_view kind, std::string_view rate_text,
                          std::string_view direction) {
    if (Status ok = check_stopped("set fault"); !ok) {
        return ok;
    }
    const std::string text(rate_text);
    char* end = nullptr;
    const double rate = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') {
        return Error(StatusCode::invalid_parameter,
                     strformat("'%s' is not a probability: give a number in [0, 1), e.g. 0.01",
                               text.c_str()));
    }
    Result<swroce::DeviceFaults> faults = swroce::get_faults(device_);
    if (!faults) {
        return faults.error();
    }
    swroce::DeviceFaults wanted = *faults;
    if (direction != "tx") {
        *fault_field(wanted.rx, kind) = rate;
    }
    if (direction != "rx") {
        *fault_field(wanted.tx, kind) = rate;
    }
    // swroce.hpp's rule: no lcore inside a burst while the injectors change.
    if (Status parked = park_all(); !parked) {
        return parked;
    }
    Status set = swroce::set_faults(device_, wanted);
    resume_all();
    if (!set) {
        return set;
    }
    std::printf("Fault %.*s set to %g (%.*s)\n", static_cast<int>(kind.size()), kind.data(), rate,
                static_cast<int>(direction.size()), direction.data());
    return {};
}

void Session::show_faults() const {
    Result<swroce::DeviceFaults> faults = swroce::get_faults(device_);
    if (!faults) {
        std::printf("%s\n", faults.error().to_string().c_str());
        return;
    }
    for (const auto& [name, rates] : {std::pair{"rx", faults->rx}, std::pair{"tx", faults->tx}}) {
        std::printf("  %s: drop %g  reorder %g  dup %g  corrupt %g  delay %g\n", name, rates.drop,
                    rates.reorder, rates.duplicate, rates.corrupt, rates.delay);
    }
}

void Session::show_config() const {
    std::printf("  engine: %.*s  burst: %u  size: %u  inline: %u  signal-every: %u\n",
                static_cast<int>(config_.engine->name.size()), config_.engine->name.data(),
                config_.fwd.burst, config_.fwd.size, config_.fwd.inline_size,
                config_.fwd.signal_every);
    std::string mix;
    for (const EngineKind kind : mix_) {
        mix += std::string(mix.empty() ? "" : ",") + engine_kind_name(kind);
    }
    std::printf("  mix: %s  forwarding lcores: %zu  forwarding: %s\n", mix.c_str(), lcores_.size(),
                forwarding_ ? "started" : "stopped");
    if (!config_.ud) {
        std::printf("  QPs: RC, loss recovery %s\n",
                    config_.selective_repeat ? "selective repeat" : "go-back-N");
    }
    if (config_.ud) {
        std::printf("  QPs: UD, Q_Key 0x%08x, %zu peer hosts, %u peer QPs to send to, datagrams "
                    "up to %u B\n",
                    ud_qkey, ahs_.size(), lcores_.front()->ud_dest_count, mtu_bytes_);
    }
    if (!srqs_.empty()) {
        std::printf("  receives: one shared receive queue of %u per lcore (srqn", srq_slots);
        for (const rdma::SharedReceiveQueue& srq : srqs_) {
            std::printf(" 0x%x", srq.srqn());
        }
        std::printf(")\n");
    }
}

} // namespace prdma::testpmd
