// prdma-testpmd: the interactive testpmd of RDMA. EAL options, `--`, then its own (options.hpp).
// The main lcore runs the prompt (or a command file); every other lcore forwards (fwd_lcore.cpp).
//
//   prdma-testpmd --lcores 0@1,1@0 --vdev=net_memif0,role=server,socket=/tmp/tp.sock
//       --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.1 -- -i --nb-qps 2
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <string_view>
#include <thread>
#include <unistd.h>
#include <vector>

#include <cmdline.h>
#include <cmdline_socket.h>

#include <prdma/eal.hpp>

#include "commands.hpp"
#include "options.hpp"
#include "session.hpp"

using namespace prdma;
using namespace prdma::testpmd;

namespace {

constexpr const char* prompt = "prdma-testpmd> ";

std::atomic<bool> interrupted{false};

void on_signal(int /*signal*/) {
    interrupted.store(true);
}

// Installed before the EAL starts, so EAL leaves them: SIGINT and SIGTERM end the session the
// way `quit` does. No SA_RESTART: the prompt's read() returns, and the prompt with it.
void install_signal_handlers() {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

// cmdline_file_new would send cmdline's own answers ("Command not found", "Bad arguments") and
// the echo of each command nowhere (its output fd is -1): this is the same with stdout.
int run_file(CommandTable& table, CommandContext& context, const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    cmdline* cl = fd < 0 ? nullptr : cmdline_new(table.context(), prompt, fd, STDOUT_FILENO);
    if (cl == nullptr) {
        std::fprintf(stderr, "prdma-testpmd: cannot read the command file %s: %s\n", path.c_str(),
                     std::strerror(errno));
        return 1;
    }
    context.current = cl;
    cmdline_interact(cl);
    cmdline_free(cl);
    ::close(fd);
    std::printf("\nRead CLI commands from %s\n", path.c_str());
    return 0;
}

void run_prompt(CommandTable& table, CommandContext& context) {
    cmdline* cl = cmdline_stdin_new(table.context(), prompt);
    if (cl == nullptr) {
        std::fprintf(stderr, "prdma-testpmd: cannot open the prompt\n");
        return;
    }
    context.current = cl;
    cmdline_interact(cl);
    cmdline_stdin_exit(cl);
    std::printf("\n");
}

// Without -i: testpmd's non-interactive mode, statistics every period until a signal, or until
// Enter (or the end of stdin).
void run_unattended(Session& session, unsigned period) {
    if (period == 0) {
        std::printf("Press enter to exit\n");
        char c = 0;
        while (!interrupted.load() && ::read(STDIN_FILENO, &c, 1) == 1 && c != '\n') {
        }
        return;
    }
    while (!interrupted.load()) {
        for (unsigned tenth = 0; tenth < period * 10 && !interrupted.load(); ++tenth) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        session.show_fwd_stats();
    }
}

SessionConfig session_config(const TestpmdOptions& o) {
    return {.device = o.device,
            .peer_host = o.peer_host,
            .peer_port = o.peer_port,
            .fwd = o.fwd,
            .engine = find_engine(o.engine),
            .srq = o.srq,
            .ud = o.ud,
            .selective_repeat = o.selective_repeat};
}

int run(const TestpmdOptions& o) {
    Result<std::unique_ptr<Session>> made = Session::create(session_config(o));
    if (!made) {
        std::fprintf(stderr, "prdma-testpmd: %s\n", made.error().to_string().c_str());
        return 1;
    }
    Session& session = **made;
    for (unsigned i = 0; i < o.nb_qps; ++i) {
        if (Status ok = session.create_qp(); !ok) {
            std::fprintf(stderr, "prdma-testpmd: %s\n", ok.error().to_string().c_str());
            return 1;
        }
    }
    CommandTable table;
    CommandContext context{.interrupted = &interrupted};
    add_commands(table, session, context);
    if (o.autostart) {
        Status started = session.connect_all();
        started = started ? session.start(false) : started;
        if (!started) {
            std::fprintf(stderr, "prdma-testpmd: autostart: %s\n",
                         started.error().to_string().c_str());
            return 1;
        }
    }
    if (!o.cmdline_file.empty() && run_file(table, context, o.cmdline_file) != 0) {
        return 1;
    }
    if (context.quit || interrupted.load()) {
        return 0;
    }
    if (o.interactive) {
        run_prompt(table, context);
    } else if (o.cmdline_file.empty() || o.autostart) {
        run_unattended(session, o.stats_period);
    }
    if (session.forwarding()) {
        (void)session.stop();
    }
    return 0;
}

int start(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    // Parsed before the EAL starts, so a mistake costs no hugepages and no device.
    int eal_argc = 1;
    while (eal_argc < argc && std::string_view(argv[eal_argc]) != "--") {
        ++eal_argc;
    }
    std::vector<char*> own{argv[0]};
    own.insert(own.end(), argv + std::min(eal_argc + 1, argc), argv + argc);
    Result<TestpmdOptions> options = parse_options(static_cast<int>(own.size()), own.data());
    if (!options) {
        std::fprintf(stderr, "prdma-testpmd: %s\n", options.error().message().c_str());
        return 2;
    }
    if (options->help) {
        print_usage(argv[0]);
        return 0;
    }
    install_signal_handlers();
    int consumed = 0;
    Result<Eal> eal = Eal::start_from_argv(eal_argc, argv, &consumed);
    if (!eal) {
        std::fprintf(stderr, "prdma-testpmd: EAL: %s\n", eal.error().to_string().c_str());
        return 1;
    }
    std::printf("prdma-testpmd: %u lcores, the main one runs the prompt\n", eal->lcore_count());
    return run(*options);
}

} // namespace

int main(int argc, char** argv) {
    try {
        return start(argc, argv);
    } catch (const std::exception& e) { // out of memory on the control path: say so, not abort
        std::fprintf(stderr, "prdma-testpmd: %s\n", e.what());
        return 1;
    }
}
