// Placeholder until `ridge generate` is written.
#include "tools/commands.h"
namespace ridge::cli {
void register_generate(CLI::App&) {}
}  // namespace ridge::cli
