// Commands for DPDK's librte_cmdline, declared as a spec string instead of one static token
// object per word (testpmd's cmdline.c style): "show qp <N>" gives a fixed "show", a fixed "qp"
// and a number. Words: `a#b#c` one of those words; `<N>` an unsigned number; any other `<NAME>`
// any word (parsed by the handler). cmdline still does the parsing, completion and the "Bad
// arguments" / "Command not found" messages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cmdline_parse.h>
#include <cmdline_parse_num.h>
#include <cmdline_parse_string.h>

namespace prdma::testpmd {

inline constexpr unsigned max_command_tokens = 8;

// Where cmdline writes each token's value: the word or number of token i.
struct ParsedTokens {
    cmdline_fixed_string_t words[max_command_tokens];
    std::uint64_t numbers[max_command_tokens];
};

class CommandArgs {
public:
    explicit CommandArgs(const ParsedTokens& tokens) : tokens_(tokens) {}
    [[nodiscard]] std::string_view word(unsigned i) const { return tokens_.words[i]; }
    [[nodiscard]] std::uint64_t number(unsigned i) const { return tokens_.numbers[i]; }

private:
    const ParsedTokens& tokens_;
};

using CommandHandler = std::function<void(const CommandArgs&)>;

struct CommandSpec {
    std::string spec;
    std::string help;
    CommandHandler handler;
};

// Owns the instances, tokens and strings cmdline points into; they live as long as the table.
class CommandTable {
public:
    void add(CommandSpec command);
    // The NULL-terminated context cmdline_stdin_new / cmdline_file_new take.
    cmdline_parse_ctx_t* context();
    [[nodiscard]] const std::vector<std::unique_ptr<CommandSpec>>& commands() const {
        return commands_;
    }

private:
    struct Token {
        cmdline_parse_token_string_t string{};
        cmdline_parse_token_num_t number{};
    };
    cmdline_parse_token_hdr_t* make_token(std::string_view word, unsigned index);

    std::vector<std::unique_ptr<CommandSpec>> commands_;
    std::vector<std::unique_ptr<std::string>> strings_;
    std::vector<std::unique_ptr<Token>> tokens_;
    std::vector<std::unique_ptr<void*[]>> instances_;
    std::vector<cmdline_parse_inst_t*> context_;
};

} // namespace prdma::testpmd
