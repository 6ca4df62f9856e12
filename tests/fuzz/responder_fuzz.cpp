// libFuzzer harness (b): sequences of frames to a connected RC QP of a real swroce device, with
// registered regions between guard bytes (responder_rig.hpp says what is checked after each
// input, responder_input.hpp how an input is laid out).
#include <cstddef>
#include <cstdint>

#include "responder_input.hpp"
#include "responder_rig.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    (void)prdma::fuzz::ResponderRig::instance(); // EAL and the device, once, before any input
    return 0;
}

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    prdma::fuzz::ResponderInput input;
    if (prdma::fuzz::parse_responder_input({data, size}, input)) {
        prdma::fuzz::ResponderRig::instance().run(input);
    }
    return 0;
}
