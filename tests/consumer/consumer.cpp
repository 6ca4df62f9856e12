// A program outside the prdma tree: it must build and run from the installed headers, libraries
// and prdma.pc alone.
#include <cstdio>

#include <prdma/build_config.hpp>
#include <prdma/status.hpp>
#include <prdma/topology.hpp>

int main() {
    auto topology = prdma::Topology::discover();
    if (!topology) {
        std::fprintf(stderr, "consumer: %s\n", topology.error().to_string().c_str());
        return 1;
    }
    if (topology->cpus().empty()) {
        std::fprintf(stderr, "consumer: no CPUs reported\n");
        return 1;
    }
    std::printf("consumer: prdma %s, %zu cpus, max devices %d\n", PRDMA_VERSION_STRING,
                topology->cpus().size(), PRDMA_MAX_DEVICES);
    return 0;
}
