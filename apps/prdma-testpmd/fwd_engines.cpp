// The table of engines `set fwd` chooses from.
#include <array>

#include "fwd_engine.hpp"

namespace prdma::testpmd {

namespace {
const std::array<const FwdEngine*, 8> engines = {&write_engine,  &read_engine,  &send_engine,
                                                 &atomic_engine, &echo_engine,  &mixed_engine,
                                                 &rxonly_engine, &udsend_engine};
} // namespace

std::span<const FwdEngine* const> fwd_engines() {
    return engines;
}

const FwdEngine* find_engine(std::string_view name) {
    for (const FwdEngine* engine : engines) {
        if (engine->name == name) {
            return engine;
        }
    }
    return nullptr;
}

} // namespace prdma::testpmd
