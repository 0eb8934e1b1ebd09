// Dumper: raw f32 files of named intermediates (see dump.h).
#include "engine/dump.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "weights/error.h"

namespace ridge {

Dumper::Dumper(std::string dir) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw Error("dump dir " + dir_ + ": cannot create: " + ec.message());
    const std::string manifest = dir_ + "/manifest.txt";
    std::FILE* f = std::fopen(manifest.c_str(), "w");
    if (!f) throw Error(manifest + ": cannot write: " + std::strerror(errno));
    std::fclose(f);
}

void Dumper::write(const std::string& name, const float* data, long rows, long row_len) {
    const bool first = started_.insert(name).second;
    const std::string path = dir_ + "/" + name + ".f32";
    std::FILE* f = std::fopen(path.c_str(), first ? "wb" : "ab");
    if (!f) throw Error(path + ": cannot write: " + std::strerror(errno));
    const size_t n = size_t(rows) * size_t(row_len);
    const size_t wrote = std::fwrite(data, sizeof(float), n, f);
    std::fclose(f);
    if (wrote != n) throw Error(path + ": short write (" + std::to_string(wrote) + " of " + std::to_string(n) + " floats)");
    if (first) {
        const std::string manifest = dir_ + "/manifest.txt";
        std::FILE* m = std::fopen(manifest.c_str(), "a");
        if (!m) throw Error(manifest + ": cannot write: " + std::strerror(errno));
        std::fprintf(m, "%s %ld\n", name.c_str(), row_len);
        std::fclose(m);
    }
}

}  // namespace ridge
