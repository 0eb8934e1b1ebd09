// ModelFile::open: choose the reader from the file's first four bytes ("GGUF" or a llama2.c
// checkpoint) and present both as a Config plus GGUF-named TensorViews.
#include "weights/model_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "weights/error.h"
#include "weights/llama2c.h"

namespace ridge {

std::unique_ptr<ModelFile> ModelFile::open(const std::string& path) {
    // Its first four bytes say the format. O_NONBLOCK, and a regular file only: a directory, FIFO or
    // device is refused at once, never waited on.
    unsigned char magic[4] = {};
    ssize_t got = 0;
    {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            const bool dir = S_ISDIR(st.st_mode);
            ::close(fd);
            throw Error(path + (dir ? ": is a directory, not a regular file" : ": not a regular file"));
        }
        got = ::read(fd, magic, 4);
        ::close(fd);
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
