// prdma-testpmd's commands, each with its help, registered in a CommandTable.
#pragma once

#include <atomic>

#include "cmdline_table.hpp"

struct cmdline;

namespace prdma::testpmd {

class Session;

// What the commands need besides the session: the prompt to end (`quit`).
struct CommandContext {
    cmdline* current = nullptr; // the cmdline running the command
    bool quit = false;
    const std::atomic<bool>* interrupted = nullptr; // SIGINT / SIGTERM seen
};

void add_commands(CommandTable& table, Session& session, CommandContext& context);

} // namespace prdma::testpmd
