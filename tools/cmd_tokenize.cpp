// Placeholder until `ridge tokenize` is written.
#include "tools/commands.h"
namespace ridge::cli {
void register_tokenize(CLI::App&) {}
}  // namespace ridge::cli
