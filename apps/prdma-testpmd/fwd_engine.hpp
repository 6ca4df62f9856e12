// A forwarding engine, as testpmd's struct fwd_engine: a name and what a forwarding lcore runs.
// The lcore calls burst() once per loop iteration, one indirect call per burst; begin() runs on
// the lcore when forwarding starts (tx_first: send one burst before anything arrives).
#pragma once

#include <span>
#include <string_view>

#include "stream.hpp"

namespace prdma::testpmd {

struct FwdLcore;

struct FwdEngine {
    std::string_view name;
    std::string_view help;
    EngineKind kind;
    void (*begin)(FwdLcore& lcore, bool tx_first);
    void (*burst)(FwdLcore& lcore);
};

extern const FwdEngine write_engine;
extern const FwdEngine read_engine;
extern const FwdEngine send_engine;
extern const FwdEngine atomic_engine;
extern const FwdEngine echo_engine;
extern const FwdEngine mixed_engine;
extern const FwdEngine rxonly_engine;
extern const FwdEngine udsend_engine;

// Why `engine` cannot run on the session's QPs, or null when it can: udsend runs on UD QPs only,
// and UD QPs run only that and rxonly (a datagram is a SEND, and echo would need the sender's
// address).
[[nodiscard]] inline const char* engine_misfit(const FwdEngine& engine, bool ud) {
    if (ud) {
        return engine.kind == EngineKind::udsend || engine.kind == EngineKind::rxonly
                   ? nullptr
                   : "the QPs are UD (--qp-type ud): udsend or rxonly";
    }
    return engine.kind == EngineKind::udsend ? "udsend needs UD QPs (--qp-type ud)" : nullptr;
}

// Every engine, in the order `set fwd` lists them.
std::span<const FwdEngine* const> fwd_engines();
const FwdEngine* find_engine(std::string_view name);

} // namespace prdma::testpmd
