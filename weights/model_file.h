// ModelFile: one loaded model, whatever its file format (GGUF, or a llama2.c checkpoint .bin),
// seen the same way: a Config and named TensorViews (GGUF names: "token_embd.weight",
// "blk.3.attn_q.weight", ...) pointing into the read-only mapping of the file (or, for a
// synthetic model from weights/synthetic.h, into memory the ModelFile owns).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weights/config.h"
#include "weights/gguf.h"
#include "weights/mapped_file.h"
#include "weights/tensor.h"

namespace ridge {

enum class ModelFormat { GGUF, Llama2c, Synthetic };  // Synthetic: no file, see weights/synthetic.h

class ModelFile {
public:
    // Detects the format from the first bytes ("GGUF" magic, else a llama2.c checkpoint) and
    // loads it; ridge::Error naming the file for a missing, unreadable or malformed file.
    static std::unique_ptr<ModelFile> open(const std::string& path);
    virtual ~ModelFile() = default;

    ModelFormat format() const { return format_; }
    const std::string& path() const { return path_; }
    const Config& config() const { return config_; }
    const std::vector<TensorView>& tensors() const { return tensors_; }
    // The GGUF file (metadata, tokenizer) or nullptr for a llama2.c checkpoint.
    const GGUFFile* gguf() const { return gguf_.get(); }

    // Bytes of the file mapped through 2 MiB pages now (weights/mapped_file.cpp: why it matters);
    // 0 for a synthetic model, or where the kernel maps none.
    size_t huge_page_bytes() const {
        return format_ == ModelFormat::Synthetic || !file_base_ ? 0 : huge_page_bytes_at(file_base_);
    }
    // Byte offset of a tensor's data from the start of the file.
    uint64_t file_offset(const TensorView& t) const { return uint64_t(t.data - file_base_); }

    const TensorView* find(std::string_view name) const;
    // The named tensor with one of `types` and exactly `shape` (GGUF order), else ridge::Error
    // naming the file, the tensor, what was expected and what was found.
    const TensorView& require(std::string_view name, std::initializer_list<DType> types,
                              const std::vector<int64_t>& shape) const;

protected:
    ModelFormat format_ = ModelFormat::GGUF;
    std::string path_;
    Config config_;
    std::vector<TensorView> tensors_;
    std::unique_ptr<GGUFFile> gguf_;
    const uint8_t* file_base_ = nullptr;  // first byte of the mapped file
};

}  // namespace ridge
