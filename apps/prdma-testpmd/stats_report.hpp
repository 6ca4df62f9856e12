// The forward statistics `stop` and `show fwd stats` print: testpmd's per-port block, per QP, per
// lcore and accumulated, with rates over the run. One "Key: value" pair per field, so scripts
// read them as easily as people.
#pragma once

#include <cstdint>

#include "stream.hpp"

namespace prdma::testpmd {

class StatsReport {
public:
    explicit StatsReport(double seconds) : seconds_(seconds > 0 ? seconds : 1e-9) {}

    void print_qp(unsigned qp, unsigned lcore, EngineKind kind, const StreamStats& stats) const;
    void print_lcore(unsigned lcore, unsigned qps, const StreamStats& stats) const;
    void print_total(const StreamStats& stats) const;

private:
    void print_body(const StreamStats& stats) const;
    double seconds_;
};

const char* engine_kind_name(EngineKind kind);

} // namespace prdma::testpmd
