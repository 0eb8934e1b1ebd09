// ridge: the command-line program. main() wires the subcommands together and turns every
// error into one line on standard error: exit 1 for an error while running, 2 for a usage error
// (an unknown command or option, a bad value), with "did you mean" for near misses.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/commands.h"
#include "weights/error.h"

namespace {
#if !RIDGE_HAVE_SERVE
// A ridge built with -DRIDGE_SERVE=OFF (the GPU bundle) still knows these commands, and says why
// it cannot run them.
void register_without_server(CLI::App& app) {
    for (const char* name : {"serve", "bench-serve"}) {
        CLI::App* cmd = app.add_subcommand(name, "(not in this build: configured with -DRIDGE_SERVE=OFF)");
        cmd->allow_extras();
        cmd->callback([name] {
            throw ridge::Error(std::string(name) + ": this ridge was built without the server (-DRIDGE_SERVE=OFF)");
        });
    }
}
#endif
// Levenshtein distance, '_' and '-' taken as the same (llama.cpp users type --top_k).
size_t edit_distance(std::string a, std::string b) {
    for (std::string* s : {&a, &b})
        for (char& c : *s)
            if (c == '_') c = '-';
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++) row[j] = j;
    for (size_t i = 1; i <= a.size(); i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); j++) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

// The closest of `names` to `word` when it is close enough to be a typo (or a llama.cpp spelling):
// at most a third of its length away, or a prefix of it; "" otherwise.
std::string nearest(const std::string& word, const std::vector<std::string>& names) {
    std::string best;
    size_t best_d = SIZE_MAX;
    for (const std::string& n : names) {
        size_t d = edit_distance(word, n);
        if (n.rfind(word, 0) == 0 || word.rfind(n, 0) == 0) d = std::min<size_t>(d, 1);
        if (d < best_d) best_d = d, best = n;
    }
    return best_d <= std::max<size_t>(2, word.size() / 3) ? best : "";
}

// "did you mean" for the arguments a command did not expect: each unknown --option that is near
// one of the command's own.
std::string suggestion(const CLI::App& app, const std::vector<std::string>& extras) {
    const CLI::App* cmd = &app;
    for (const CLI::App* sub : app.get_subcommands()) cmd = sub;  // the command that parsed
    std::vector<std::string> names;
    for (const CLI::Option* opt : cmd->get_options())
        for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
    for (const std::string& x : extras) {
        const std::string word = x.substr(0, x.find('='));
        if (word.rfind("--", 0) != 0) continue;
        const std::string near = nearest(word, names);
        if (!near.empty()) return " (did you mean " + near + "?)";
    }
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"ridge: a small Llama-style inference engine that knows its own roofline"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "ridge 0.1");
    app.failure_message([](const CLI::App*, const CLI::Error& e) {  // argument errors: one line too
        return "ridge: " + std::string(e.what()) + " (see --help)\n";
    });
    ridge::cli::register_info(app);
    ridge::cli::register_tokenize(app);
    ridge::cli::register_template(app);
    ridge::cli::register_generate(app);
    ridge::cli::register_probe(app);
    ridge::cli::register_bench(app);
    ridge::cli::register_explain(app);
    ridge::cli::register_roofline(app);
    ridge::cli::register_quantize(app);
    ridge::cli::register_perplexity(app);
#if RIDGE_HAVE_SERVE
    ridge::cli::register_serve(app);
    ridge::cli::register_bench_serve(app);
#else
    register_without_server(app);
#endif
    ridge::cli::register_batch_bench(app);
    // An unknown command is named, with the nearest one and the list, before CLI11 would call it
    // "not expected".
    if (argc > 1 && argv[1][0] != '-') {
        std::vector<std::string> commands;
        for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
        if (std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
            const std::string near = nearest(argv[1], commands);
            std::string list;
            for (const std::string& c : commands) list += (list.empty() ? "" : ", ") + c;
            std::fprintf(stderr, "ridge: unknown command '%s'%s; the commands are %s (see --help)\n", argv[1],
                         near.empty() ? "" : (" (did you mean '" + near + "'?)").c_str(), list.c_str());
            return 2;
        }
    }
    // llama.cpp's -ngl (CLI11 takes one-letter short options only) is --n-gpu-layers.
    std::vector<std::string> args(argv + 1, argv + argc);
    for (std::string& a : args)
        if (a == "-ngl") a = "--n-gpu-layers";
    std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
    // Exit codes: 0 done (--help and --version too), 1 an error while running, 2 a usage error.
    try {
        app.parse(args);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        const auto* extras = dynamic_cast<const CLI::ExtrasError*>(&e);
        std::fflush(stdout);
        std::fprintf(stderr, "ridge: %s%s (see --help)\n", e.what(),
                     extras ? suggestion(app, std::vector<std::string>(argv + 1, argv + argc)).c_str() : "");
        return 2;
    } catch (const ridge::Error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "ridge: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fflush(stdout);
        std::fprintf(stderr, "ridge: out of memory\n");
        return 1;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "ridge: internal error: %s\n", e.what());
        return 1;
    }
    return 0;
}
