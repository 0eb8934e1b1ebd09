// GGUFWriter: writes a GGUF v3 file: header, metadata (every GGUFType, arrays included, taken in
// the reader's GGUFValue form so that a file read with GGUFFile can be written back unchanged),
// tensor infos with their data offsets, and the tensor data, each tensor padded to the alignment.
// Data is streamed tensor by tensor (never the whole file in memory) into PATH.tmp, which close()
// renames to PATH: a failure or an abandoned writer leaves no half-written PATH behind.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "weights/gguf.h"
#include "weights/types.h"

namespace ridge {

using GGUFMetadata = std::map<std::string, GGUFValue, std::less<>>;

// One tensor as the writer lays it out: name, element type and shape (GGUF order, shape[0] the
// row length, which must be a multiple of block_elems(type)).
struct GGUFTensorSpec {
    std::string name;
    DType type = DType::F32;
    std::vector<int64_t> shape;
    size_t nbytes() const;  // bytes of its data (without padding)
};

class GGUFWriter {
public:
    // Checks the metadata and tensors, creates PATH.tmp and writes everything before the tensor
    // data. The alignment is the metadata's `general.alignment` if present (a power of two in
    // [8, 2^30], as the reader demands), else 32. ridge::Error naming the path, key or tensor on a
    // bad value (an integer out of its type's range, a nested array, a bool other than 0/1), a bad
    // tensor (duplicate name, 0 or more than 4 dimensions, a row length not a multiple of the
    // block size) or a file that cannot be created or written.
    GGUFWriter(std::string path, const GGUFMetadata& metadata, std::vector<GGUFTensorSpec> tensors);
    ~GGUFWriter();  // an unclosed writer closes and removes PATH.tmp
    GGUFWriter(const GGUFWriter&) = delete;
    GGUFWriter& operator=(const GGUFWriter&) = delete;

    // Appends the next `n` bytes of tensor data. Tensors are filled in the order given, each in one
    // or more calls; a call may not run past the end of the current tensor. After a tensor's last
    // byte its padding follows. std::logic_error when more bytes arrive than the tensors hold.
    void write(const void* data, size_t n);
    // The tensor that the next write() fills (== tensors().size() once all are complete).
    size_t current_tensor() const { return cur_; }
    // Flushes, checks that every tensor got all its bytes, closes and renames PATH.tmp to PATH.
    // ridge::Error on a write error (disk full) or missing data; the temporary file is removed.
    void close();

    const std::string& path() const { return path_; }
    size_t alignment() const { return alignment_; }
    size_t data_offset() const { return data_offset_; }             // start of the tensor data section
    const std::vector<GGUFTensorSpec>& tensors() const { return tensors_; }
    const std::vector<uint64_t>& offsets() const { return offsets_; }  // per tensor, from data_offset()
    uint64_t bytes_written() const { return written_; }            // so far, whole file

private:
    void put(const void* p, size_t n);  // raw bytes to the file, counted; ridge::Error on failure
    void pad_to_alignment();
    void abandon();  // close and remove the temporary file (no throw)

    std::string path_, tmp_path_;
    std::FILE* fp_ = nullptr;
    size_t alignment_ = 32;
    size_t data_offset_ = 0;
    std::vector<GGUFTensorSpec> tensors_;
    std::vector<uint64_t> offsets_;
    size_t cur_ = 0;          // tensor being filled
    size_t cur_filled_ = 0;   // its bytes written so far
    uint64_t written_ = 0;
};

}  // namespace ridge
