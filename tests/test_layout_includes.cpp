// The folder order of ../shared/design.md, read from every #include of the sources: data flows
// weights -> tokenizer, weights -> kernels -> engine -> measure -> tools, so no file includes a
// folder above its own; kernels/cpu and kernels/cuda share only kernels/*.h (neither includes the
// other); and no chain of includes comes back to the file it started from.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(RIDGE_TESTS_DIR).parent_path();

// The folders each folder may include (itself included).
const std::map<std::string, std::set<std::string>>& allowed() {
    static const std::map<std::string, std::set<std::string>> a = {
        {"weights", {"weights"}},
        {"tokenizer", {"tokenizer", "weights"}},
        {"kernels", {"kernels", "weights"}},
        {"kernels/cpu", {"kernels/cpu", "kernels", "weights"}},
        {"kernels/cuda", {"kernels/cuda", "kernels", "weights"}},
        {"engine", {"engine", "kernels", "kernels/cpu", "kernels/cuda", "tokenizer", "weights"}},
        {"measure", {"measure", "engine", "kernels", "kernels/cpu", "kernels/cuda", "tokenizer", "weights"}},
        {"tools", {"tools", "measure", "engine", "kernels", "kernels/cpu", "kernels/cuda", "tokenizer", "weights"}},
    };
    return a;
}

// "kernels/cpu/matmul.h" -> "kernels/cpu"; "kernels/types.h" -> "kernels".
std::string folder_of(const std::string& path) { return fs::path(path).parent_path().generic_string(); }

struct Source {
    std::string path;                   // relative to the repository root
    std::vector<std::string> includes;  // quoted includes, as written (paths from the root)
};

std::vector<Source> sources() {
    std::vector<Source> out;
    const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
    for (const auto& [folder, _] : allowed()) {
        if (!fs::is_directory(kRoot / folder)) continue;
        for (const auto& e : fs::directory_iterator(kRoot / folder)) {
            const std::string ext = e.path().extension().string();
            if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh")) continue;
            Source s;
            s.path = fs::relative(e.path(), kRoot).generic_string();
            std::ifstream in(e.path());
            std::string line;
            std::smatch m;
            while (std::getline(in, line))
                if (std::regex_search(line, m, include)) s.includes.push_back(m[1]);
            out.push_back(std::move(s));
        }
    }
    return out;
}

// Every include that breaks the folder order, as "FILE includes \"X\": A/ may not include B/".
std::vector<std::string> upward_includes(const std::vector<Source>& all) {
    std::vector<std::string> out;
    for (const Source& s : all) {
        const std::string from = folder_of(s.path);
        for (const std::string& inc : s.includes) {
            const std::string to = folder_of(inc);
            if (!allowed().count(to)) continue;  // not one of ridge's folders (e.g. a third-party header)
            if (!allowed().at(from).count(to))
                out.push_back(s.path + " includes \"" + inc + "\": " + from + "/ may not include " + to + "/");
        }
    }
    return out;
}

// Every include cycle among these files, as "a -> b -> a".
std::vector<std::string> include_cycles(const std::vector<Source>& all) {
    std::map<std::string, std::vector<std::string>> graph;
    for (const Source& s : all) graph[s.path] = s.includes;
    std::vector<std::string> out;
    std::map<std::string, int> state;  // 0 new, 1 on the depth-first path, 2 done
    std::vector<std::string> path;
    std::function<void(const std::string&)> visit = [&](const std::string& f) {
        state[f] = 1;
        path.push_back(f);
        for (const std::string& g : graph[f]) {
            if (!graph.count(g)) continue;  // not one of these files
            if (state[g] == 1) {
                std::string cycle;
                for (auto it = std::find(path.begin(), path.end(), g); it != path.end(); ++it) cycle += *it + " -> ";
                out.push_back(cycle + g);
            } else if (state[g] == 0) {
                visit(g);
            }
        }
        path.pop_back();
        state[f] = 2;
    };
    for (const auto& [f, _] : graph)
        if (state[f] == 0) visit(f);
    return out;
}

TEST(LayoutIncludes, FindsTheSources) {
    const std::vector<Source> all = sources();
    EXPECT_GT(all.size(), 80u) << "the sources were not found under " << kRoot;
    bool saw_forward = false;
    for (const Source& s : all) saw_forward = saw_forward || s.path == "engine/forward.cpp";
    EXPECT_TRUE(saw_forward);
}

TEST(LayoutIncludes, NoFolderIncludesAFolderAboveIt) {
    for (const std::string& v : upward_includes(sources())) ADD_FAILURE() << v << " (design.md's folder order)";
}

TEST(LayoutIncludes, NoIncludeCycles) {
    for (const std::string& c : include_cycles(sources())) ADD_FAILURE() << "include cycle: " << c;
}

// The checks on a few written files: they report what they must, and nothing else.
TEST(LayoutIncludes, TheChecksSeeAnUpwardIncludeAndACycle) {
    const std::vector<Source> tree = {
        {"kernels/cuda/ops.h", {"kernels/types.h", "kernels/cpu/ops.h", "cuda_runtime.h"}},
        {"kernels/types.h", {"weights/types.h"}},
        {"weights/types.h", {}},
        {"engine/a.h", {"engine/b.h", "kernels/types.h"}},
        {"engine/b.h", {"engine/a.h", "measure/bench.h"}},
    };
    const std::vector<std::string> up = upward_includes(tree);
    ASSERT_EQ(up.size(), 2u);
    EXPECT_EQ(up[0], "kernels/cuda/ops.h includes \"kernels/cpu/ops.h\": kernels/cuda/ may not include kernels/cpu/");
    EXPECT_EQ(up[1], "engine/b.h includes \"measure/bench.h\": engine/ may not include measure/");
    const std::vector<std::string> cycles = include_cycles(tree);
    ASSERT_EQ(cycles.size(), 1u);
    EXPECT_EQ(cycles[0], "engine/a.h -> engine/b.h -> engine/a.h");
}

}  // namespace
