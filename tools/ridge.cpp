// ridge: the command-line program. main() wires the subcommands together and turns every
// error into one line on standard error and a non-zero exit code.
#include <cstdio>
#include <exception>
#include <string>

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
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
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
        return 2;
    }
    return 0;
}
