// The reference captures in tests/data/roce-pcaps (Linux rxe, kernel 6.1): where they are, loading
// them once per test binary, and INDEX.txt's per-file frame counts.
//
// The folder comes from PRDMA_ROCE_PCAPS (meson sets it from the shared_dir option), else
// tests/data/roce-pcaps in the source tree.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <prdma/build_config.hpp>

#include "pcap_reader.hpp"

namespace prdma::roce::captures {

struct Capture {
    std::string name; // file name without .pcap
    pcap::File file;
};

inline std::filesystem::path directory() {
    if (const char* env = std::getenv("PRDMA_ROCE_PCAPS"); env != nullptr && *env != '\0') {
        return env;
    }
    return std::filesystem::path(PRDMA_SOURCE_ROOT) / "tests" / "data" / "roce-pcaps";
}

// Every *.pcap in the folder, sorted by name. `error` says what went wrong when empty.
struct Loaded {
    std::vector<Capture> captures;
    std::string error;
};

inline const Loaded& all() {
    static const Loaded loaded = [] {
        Loaded result;
        const std::filesystem::path dir = directory();
        std::error_code ec;
        if (!std::filesystem::is_directory(dir, ec)) {
            result.error = "no capture folder at " + dir.string() + " (set PRDMA_ROCE_PCAPS)";
            return result;
        }
        std::vector<std::filesystem::path> paths;
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            if (entry.path().extension() == ".pcap") {
                paths.push_back(entry.path());
            }
        }
        std::sort(paths.begin(), paths.end());
        for (const auto& path : paths) {
            pcap::ReadResult read = pcap::read(path.string());
            if (!read.ok()) {
                result.error = read.error;
                result.captures.clear();
                return result;
            }
            result.captures.push_back({path.stem().string(), std::move(read.file)});
        }
        if (result.captures.empty()) {
            result.error = "no .pcap files in " + dir.string();
        }
        return result;
    }();
    return loaded;
}

inline const Capture* find(const std::string& name) {
    for (const Capture& c : all().captures) {
        if (c.name == name) {
            return &c;
        }
    }
    return nullptr;
}

// INDEX.txt: "<file>.pcap<TAB><commands>" then "<TAB><n> frames: <Name> x<k>; <Name> x<k>; ..."
struct IndexEntry {
    std::size_t frames = 0;
    std::map<std::string, std::size_t> counts; // "RC Send First" -> 6, "CM: ReadyToUse" -> 1
};

inline std::map<std::string, IndexEntry> read_index() {
    std::map<std::string, IndexEntry> index;
    std::ifstream in(directory() / "INDEX.txt");
    std::string line;
    std::string current;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        if (line[0] != '\t') {
            const std::size_t end = line.find(".pcap");
            current = end == std::string::npos ? std::string() : line.substr(0, end);
            continue;
        }
        const std::size_t colon = line.find(" frames: ");
        if (current.empty() || colon == std::string::npos) {
            continue;
        }
        IndexEntry& entry = index[current];
        entry.frames = std::stoul(line.substr(1, colon - 1));
        std::string rest = line.substr(colon + 9);
        std::size_t at = 0;
        while (at < rest.size()) {
            std::size_t end = rest.find("; ", at);
            if (end == std::string::npos) {
                end = rest.size();
            }
            const std::string item = rest.substr(at, end - at);
            const std::size_t x = item.rfind(" x");
            if (x != std::string::npos) {
                entry.counts[item.substr(0, x)] += std::stoul(item.substr(x + 2));
            }
            at = end + 2;
        }
    }
    return index;
}

} // namespace prdma::roce::captures
