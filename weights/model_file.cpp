// ModelFile::open: choose the reader from the file's first four bytes ("GGUF" or a llama2.c
// checkpoint) and present both as a Config plus GGUF-named TensorViews.
#include "weights/model_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "weights/error.h"
#include "weights/llama2c.h"

namespace ridge {

std::unique_ptr<ModelFile> ModelFile::open(const std::string& path) {
    unsigned char magic[4] = {};
    size_t got = 0;
    {
        std::FILE* fp = std::fopen(path.c_str(), "rb");
        if (!fp) throw Error(path + ": cannot open: " + std::strerror(errno));
        got = std::fread(magic, 1, 4, fp);
        std::fclose(fp);
    }
    if (got == 4 && std::memcmp(magic, "GGUF", 4) == 0) {
        auto m = std::make_unique<ModelFile>();
        m->format_ = ModelFormat::GGUF;
        m->path_ = path;
        m->gguf_ = GGUFFile::open(path);
        m->config_ = config_from_gguf(*m->gguf_);
        m->tensors_ = m->gguf_->tensors();
        m->file_base_ = m->gguf_->data();
        return m;
    }
    return open_llama2c(path);
}

const TensorView* ModelFile::find(std::string_view name) const { return find_tensor(tensors_, name); }

const TensorView& ModelFile::require(std::string_view name, std::initializer_list<DType> types,
                                     const std::vector<int64_t>& shape) const {
    return require_tensor(tensors_, path_, name, types, shape);
}

}  // namespace ridge
