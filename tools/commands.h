// The ridge CLI's subcommands. Each register_* adds one CLI11 subcommand whose callback does
// the work; bad input is reported by throwing ridge::Error, which main() prints as one line.
#pragma once
#include <CLI/CLI.hpp>

namespace ridge::cli {

void register_info(CLI::App& app);      // tools/cmd_info.cpp
void register_tokenize(CLI::App& app);  // tools/cmd_tokenize.cpp
void register_template(CLI::App& app);  // tools/cmd_template.cpp
void register_generate(CLI::App& app);  // tools/cmd_generate.cpp (generate and chat)
void register_probe(CLI::App& app);     // tools/cmd_probe.cpp
void register_explain(CLI::App& app);   // tools/cmd_explain.cpp
void register_bench(CLI::App& app);     // tools/cmd_bench.cpp
void register_roofline(CLI::App& app);  // tools/cmd_roofline.cpp
void register_quantize(CLI::App& app);  // tools/cmd_quantize.cpp
void register_perplexity(CLI::App& app);  // tools/cmd_perplexity.cpp
void register_serve(CLI::App& app);     // tools/cmd_serve.cpp
void register_bench_serve(CLI::App& app);  // tools/cmd_bench_serve.cpp
void register_batch_bench(CLI::App& app);  // tools/cmd_batch_bench.cpp

}  // namespace ridge::cli
