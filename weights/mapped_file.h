// MappedFile: a whole file mapped read-only into memory (POSIX mmap), unmapped on destruction.
// Model readers (GGUF, llama2.c) keep one alive for as long as their TensorViews point into it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ridge {

class MappedFile {
public:
    // ridge::Error naming the path for a missing, unreadable, empty or non-regular file.
    static std::shared_ptr<const MappedFile> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    MappedFile() = default;
    std::string path_;
    const uint8_t* data_ = nullptr;  // (size_) bytes
    size_t size_ = 0;
};

}  // namespace ridge
