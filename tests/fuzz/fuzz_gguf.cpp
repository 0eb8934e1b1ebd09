// libFuzzer target for the GGUF reader: parse arbitrary bytes with GGUFFile::from_memory, then
// touch every metadata value, every tensor byte and the Llama config. Bad input must end in
// ridge::Error; anything else (a crash, a sanitizer report, a huge allocation) is a bug.
// Build: clang++ -std=c++20 -I. -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_gguf.cpp weights/*.cpp
#include <cstddef>
#include <cstdint>

#include "weights/config.h"
#include "weights/error.h"
#include "weights/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        auto f = ridge::GGUFFile::from_memory(data, size, "fuzz.gguf");
        size_t sink = f->version() + f->alignment() + f->data_offset();
        for (const auto& [key, v] : f->metadata()) {
            sink += key.size() + v.array_size() + v.s.size();
            sink += f->value_str(key).size();
        }
        for (const ridge::TensorView& t : f->tensors()) {
            uint8_t x = 0;
            for (size_t i = 0; i < t.nbytes; i++) x ^= t.data[i];  // ASan checks every byte is in range
            sink += x + size_t(t.n_elements());
        }
        try {
            ridge::Config c = ridge::config_from_gguf(*f);
            sink += size_t(c.n_vocab);
        } catch (const ridge::Error&) {
        }
        volatile size_t keep = sink;
        (void)keep;
    } catch (const ridge::Error&) {
    }
    return 0;
}
