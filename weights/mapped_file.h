// MappedFile: a whole file mapped read-only into memory (POSIX mmap), unmapped on destruction.
// Model readers (GGUF, llama2.c) keep one alive for as long as their TensorViews point into it.
// Files of 8 MiB and more are mapped 2 MiB-aligned and marked for huge pages (mapped_file.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ridge {

// A huge page: 2 MiB on x86-64 and arm64 (4 KiB base). Mapped files and the KV cache start on one.
inline constexpr size_t kHugePage = size_t(2) << 20;

// The bytes of the mapping that holds addr which are mapped through 2 MiB pages (/proc/self/smaps:
// FilePmdMapped for a file, AnonHugePages for anonymous memory), 0 if none or no such mapping.
size_t huge_page_bytes_at(const void* addr);

// The whole of a regular file as bytes, for the small files ridge reads (a prompt or text file, a
// llama2.c tokenizer, a saved bench run). ridge::Error naming the path and `what` the file was
// for when it cannot be opened, is not a regular file (a directory, a FIFO or a device: refused at
// once, never waited on), is larger than max_bytes, or cannot be read.
std::string read_whole_file(const std::string& path, const std::string& what, size_t max_bytes = size_t(1) << 30);

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
    // How many of its bytes are mapped through 2 MiB pages now (mapped_file.cpp: why), from
    // /proc/self/smaps; 0 where the kernel maps none or says nothing.
    size_t huge_page_bytes() const;

private:
    MappedFile() = default;
    std::string path_;
    const uint8_t* data_ = nullptr;  // (size_) bytes
    size_t size_ = 0;
};

}  // namespace ridge
