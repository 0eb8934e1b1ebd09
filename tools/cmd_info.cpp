// Placeholder until `ridge info` is written.
#include "tools/commands.h"
namespace ridge::cli {
void register_info(CLI::App&) {}
}  // namespace ridge::cli
