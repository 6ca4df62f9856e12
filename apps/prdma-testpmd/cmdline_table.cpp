// CommandTable: a cmdline_parse_inst_t ends in a flexible array of token pointers, which C++
// cannot declare inside a struct of its own; each instance is laid out in an array of pointers
// instead: f, data, help_str, the tokens, then NULL (the static_asserts check that layout).
#include "cmdline_table.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <exception>

namespace prdma::testpmd {

namespace {

static_assert(offsetof(cmdline_parse_inst_t, f) == 0);
static_assert(offsetof(cmdline_parse_inst_t, data) == sizeof(void*));
static_assert(offsetof(cmdline_parse_inst_t, help_str) == 2 * sizeof(void*));
static_assert(offsetof(cmdline_parse_inst_t, tokens) == 3 * sizeof(void*));
static_assert(sizeof(void (*)()) == sizeof(void*));

// Runs the handler; nothing may unwind into cmdline's C code.
void dispatch(void* parsed, cmdline* /*cl*/, void* data) {
    const auto& command = *static_cast<const CommandSpec*>(data);
    try {
        command.handler(CommandArgs(*static_cast<const ParsedTokens*>(parsed)));
    } catch (const std::exception& e) {
        std::printf("error: %s\n", e.what());
    }
    std::fflush(stdout);
}

std::vector<std::string_view> split(std::string_view spec) {
    std::vector<std::string_view> words;
    while (!spec.empty()) {
        const std::size_t space = spec.find(' ');
        if (space != 0) {
            words.push_back(spec.substr(0, space));
        }
        spec = space == std::string_view::npos ? std::string_view{} : spec.substr(space + 1);
    }
    return words;
}

} // namespace

cmdline_parse_token_hdr_t* CommandTable::make_token(std::string_view word, unsigned index) {
    auto token = std::make_unique<Token>();
    cmdline_parse_token_hdr_t* header = nullptr;
    if (word == "<N>") {
        token->number.hdr.ops = &cmdline_token_num_ops;
        token->number.hdr.offset =
            static_cast<unsigned>(offsetof(ParsedTokens, numbers) + index * sizeof(std::uint64_t));
        token->number.num_data.type = RTE_UINT64;
        header = &token->number.hdr;
    } else {
        token->string.hdr.ops = &cmdline_token_string_ops;
        token->string.hdr.offset = static_cast<unsigned>(offsetof(ParsedTokens, words) +
                                                         index * sizeof(cmdline_fixed_string_t));
        if (!word.starts_with('<')) {
            strings_.push_back(std::make_unique<std::string>(word));
            token->string.string_data.str = strings_.back()->c_str();
        } // else NULL: any word
        header = &token->string.hdr;
    }
    tokens_.push_back(std::move(token));
    return header;
}

void CommandTable::add(CommandSpec command) {
    commands_.push_back(std::make_unique<CommandSpec>(std::move(command)));
    CommandSpec& stored = *commands_.back();
    const std::vector<std::string_view> words = split(stored.spec);
    auto slots = std::make_unique<void*[]>(3 + words.size() + 1); // NOLINT: cmdline's C layout
    auto* instance = reinterpret_cast<cmdline_parse_inst_t*>(slots.get());
    instance->f = dispatch;
    instance->data = &stored;
    // Choices as testpmd's help writes them (a|b), not as cmdline's tokens do (a#b).
    std::string shown = stored.spec;
    std::replace(shown.begin(), shown.end(), '#', '|');
    stored.help = shown + "\n    " + stored.help;
    instance->help_str = stored.help.c_str();
    for (std::size_t i = 0; i < words.size() && i < max_command_tokens; ++i) {
        instance->tokens[i] = make_token(words[i], static_cast<unsigned>(i));
    }
    instance->tokens[std::min<std::size_t>(words.size(), max_command_tokens)] = nullptr;
    instances_.push_back(std::move(slots));
    context_.push_back(instance);
}

cmdline_parse_ctx_t* CommandTable::context() {
    if (context_.empty() || context_.back() != nullptr) {
        context_.push_back(nullptr);
    }
    return context_.data();
}

} // namespace prdma::testpmd
