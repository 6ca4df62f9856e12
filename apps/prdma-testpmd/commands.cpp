// The command set, in testpmd's words where testpmd has one (show, clear, set fwd, start, stop,
// start tx_first, quit) and in verbs' words for RDMA objects (qp, cq, mr, fast-register,
// invalidate). A failure prints "Bad argument: ..." or "Error: ..." and the prompt goes on.
#include "commands.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <cmdline.h>

#include "session.hpp"

namespace prdma::testpmd {

namespace {

void report(const Status& status) {
    if (!status) {
        const bool bad = status.code() == StatusCode::invalid_parameter;
        std::printf("%s: %s\n", bad ? "Bad argument" : "Error", status.error().message().c_str());
    }
}

unsigned as_index(std::uint64_t n) {
    return n > 0xffffffU ? 0xffffffU : static_cast<unsigned>(n);
}

void add_show(CommandTable& t, Session& s) {
    t.add({"show device info#stats#xstats",
           "the device's attributes and ports, its main counters, or every counter",
           [&s](const CommandArgs& a) {
               if (a.word(2) == "info") {
                   s.show_device_info();
               } else {
                   s.show_device_stats(a.word(2) == "xstats");
               }
           }});
    t.add({"show qp", "every QP: number, lcore, state, peer",
           [&s](const CommandArgs&) { s.show_qps(std::nullopt); }});
    t.add(
        {"show qp <N>", "QP N", [&s](const CommandArgs& a) { s.show_qps(as_index(a.number(2))); }});
    t.add({"show qp <N> descriptor",
           "QP N's connection descriptor in hex, to paste into the peer's `connect qp N "
           "descriptor HEX`",
           [&s](const CommandArgs& a) {
               Result<std::string> hex = s.qp_descriptor(as_index(a.number(2)));
               hex ? (void)std::printf("%s\n", hex->c_str()) : report(hex.error());
           }});
    t.add({"show cq", "the CQs, one per forwarding lcore",
           [&s](const CommandArgs&) { s.show_cqs(); }});
    t.add({"show mr", "the QPs' buffers and the regions `register mr` made",
           [&s](const CommandArgs&) { s.show_mrs(); }});
    t.add({"show fwd stats", "forward statistics of the run (while running: so far)",
           [&s](const CommandArgs&) { s.show_fwd_stats(); }});
    t.add(
        {"show config", "the forwarding settings", [&s](const CommandArgs&) { s.show_config(); }});
    t.add({"show fault", "swroce's fault rates", [&s](const CommandArgs&) { s.show_faults(); }});
    t.add({"clear stats", "start the statistics over", [&s](const CommandArgs&) {
               s.clear_stats();
               std::printf("Statistics cleared\n");
           }});
}

void add_objects(CommandTable& t, Session& s) {
    t.add({"create qp", "a QP on the next lcore (round-robin), with its buffer",
           [&s](const CommandArgs&) { report(s.create_qp()); }});
    t.add({"connect qp <N>", "connect QP N with the peer's QP N over the TCP channel (--peer)",
           [&s](const CommandArgs& a) { report(s.connect_qp(as_index(a.number(2)))); }});
    t.add({"connect qp <N> descriptor <HEX>",
           "connect QP N to the QP a pasted descriptor names (the peer's `show qp N descriptor`)",
           [&s](const CommandArgs& a) {
               report(s.connect_qp_from(as_index(a.number(2)), a.word(4)));
           }});
    t.add({"connect all", "connect every QP not yet connected over the TCP channel",
           [&s](const CommandArgs&) { report(s.connect_all()); }});
    t.add({"destroy qp <N>", "destroy QP N (its number is not reused)",
           [&s](const CommandArgs& a) { report(s.destroy_qp(as_index(a.number(2)))); }});
    t.add({"register mr <N>", "register N bytes with local and remote read/write access",
           [&s](const CommandArgs& a) { report(s.register_mr(a.number(2), "")); }});
    t.add({"register mr <N> <ACCESS>", "register N bytes; ACCESS a comma list of lw, rw, rr, ra",
           [&s](const CommandArgs& a) { report(s.register_mr(a.number(2), a.word(3))); }});
    t.add({"fast-register mr <N> qp <N>",
           "FAST_REG MR N's pages through QP N's send queue; prints the new rkey",
           [&s](const CommandArgs& a) {
               report(s.fast_register(as_index(a.number(2)), as_index(a.number(4))));
           }});
    t.add({"invalidate mr <N> qp <N>", "LOCAL_INV MR N's fast-registered key through QP N",
           [&s](const CommandArgs& a) {
               report(s.invalidate(as_index(a.number(2)), as_index(a.number(4))));
           }});
}

void add_settings(CommandTable& t, Session& s) {
    // Any word, not cmdline's choice list, so a wrong name gets the list of engines.
    t.add({"set fwd <ENGINE>",
           "the forwarding engine: write, read, send, atomic, echo, mixed, rxonly",
           [&s](const CommandArgs& a) { report(s.set_engine(a.word(2))); }});
    t.add({"set mix <LIST>",
           "mixed engine: QP n runs the (n mod len)-th verb of LIST, e.g. "
           "write,read,send,atomic",
           [&s](const CommandArgs& a) { report(s.set_mix(a.word(2))); }});
    t.add({"set burst#size#qps#inline#signal-every <N>",
           "WRs per burst, message bytes, QPs (created or destroyed), inline threshold, "
           "WRs per signaled completion",
           [&s](const CommandArgs& a) { report(s.set_fwd_value(a.word(1), a.number(2))); }});
    t.add({"set fault drop#reorder#dup#corrupt#delay <RATE>",
           "swroce: the probability of the fault on received frames (forwarding stopped)",
           [&s](const CommandArgs& a) { report(s.set_fault(a.word(2), a.word(3), "rx")); }});
    t.add({"set fault drop#reorder#dup#corrupt#delay <RATE> rx#tx#both",
           "swroce: the probability of the fault in one direction or both",
           [&s](const CommandArgs& a) { report(s.set_fault(a.word(2), a.word(3), a.word(4))); }});
}

void add_session(CommandTable& t, Session& s, CommandContext& c) {
    t.add({"start", "start forwarding", [&s](const CommandArgs&) { report(s.start(false)); }});
    t.add({"start tx_first", "start forwarding, each QP sending one burst first",
           [&s](const CommandArgs&) { report(s.start(true)); }});
    t.add({"stop", "stop forwarding and print its statistics",
           [&s](const CommandArgs&) { report(s.stop()); }});
    t.add({"sync", "wait until the peer runs `sync` too (orders two scripted sessions)",
           [&s](const CommandArgs&) {
               report(s.sync_peer());
               std::printf("Synchronized with the peer\n");
           }});
    t.add({"sleep <SECONDS>", "wait (scripts: let forwarding run)", [&c](const CommandArgs& a) {
               const double seconds = std::strtod(std::string(a.word(1)).c_str(), nullptr);
               const auto end = std::chrono::steady_clock::now() +
                                std::chrono::duration<double>(seconds > 0 ? seconds : 0);
               while (std::chrono::steady_clock::now() < end && !c.interrupted->load()) {
                   std::this_thread::sleep_for(std::chrono::milliseconds(10));
               }
           }});
    t.add({"quit", "stop forwarding, release everything and exit", [&c](const CommandArgs&) {
               c.quit = true;
               cmdline_quit(c.current);
           }});
    t.add({"help", "this list", [&t](const CommandArgs&) {
               std::printf("Commands (Tab completes, ? lists what may follow):\n");
               for (const auto& command : t.commands()) {
                   std::printf("  %s\n", command->help.c_str());
               }
           }});
}

} // namespace

void add_commands(CommandTable& table, Session& session, CommandContext& context) {
    add_show(table, session);
    add_objects(table, session);
    add_settings(table, session);
    add_session(table, session, context);
}

} // namespace prdma::testpmd
