// Dumper: the debug switch that writes named intermediates ("layer.3.attn_norm", "logits", ...)
// as raw little-endian f32 files DIR/<name>.f32, so ridge can be compared tensor by tensor with a
// reference. Each forward call appends its rows, so after prefilling and decoding one sequence a
// file holds one row per position in order; DIR/manifest.txt lists "name row_length" once per name.
#pragma once
#include <set>
#include <string>

namespace ridge {

class Dumper {
public:
    explicit Dumper(std::string dir);  // creates dir; ridge::Error when it cannot
    // Writes rows x row_len floats under `name` (truncating the file on its first write).
    void write(const std::string& name, const float* data, long rows, long row_len);
    const std::string& dir() const { return dir_; }

private:
    std::string dir_;
    std::set<std::string> started_;  // names written so far by this Dumper
};

}  // namespace ridge
