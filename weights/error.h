// ridge::Error: the one exception type for bad input (files, arguments, metadata).
// Its message is a single line that names the thing, what is wrong and where;
// the CLI prints it as "ridge: <message>" and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace ridge {

struct Error : std::runtime_error {
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace ridge
