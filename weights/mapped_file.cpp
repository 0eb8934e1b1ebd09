// MappedFile: open + fstat + mmap(PROT_READ, MAP_PRIVATE) of a whole file; errors name the path
// and the failing call with strerror(errno).
//
// Huge pages. Decode streams every weight once per token, so the rate at which the mapped file can
// be read bounds it, and a read is faster when the bytes are held in 2 MiB folios and mapped
// through 2 MiB page-table entries than through 4 KiB pages; decode is faster for it
// (docs/measurements/source-comment-history.md). Anonymous memory gains too
// (kernels/cpu/probe.cpp), so `ridge probe` reads 2 MiB pages. Fewer TLB misses, and hardware
// prefetchers that stop at page boundaries, are the likely reasons. The kernel maps a file so when
// it is read through a mapping marked MADV_HUGEPAGE whose address and file offset agree modulo
// 2 MiB, if the filesystem keeps large folios (ext4, xfs on recent kernels). A file already in the
// page cache in small pages stays so, though: just written by unzip, or read by another program
// (llama.cpp, Python) through plain readahead. So open() looks at every region the cache holds
// (mincore), and if any is in small pages while the kernel can give huge ones (some other region
// is huge, or one region dropped and read again comes back huge), the whole file is written back
// if dirty and dropped (clean pages, read again from disk as the forward pass touches them). Every
// region, not one: a file another program has read can be cached huge in some regions and small
// in others. A kernel or filesystem that cannot costs the re-read of 2 MiB and nothing else. Pages
// another process has mapped are not dropped: while it keeps part of the file mapped in small
// pages, each open drops and reads again the rest. huge_page_bytes() says what a mapping got.
#include "weights/mapped_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "weights/error.h"

namespace ridge {

namespace {

constexpr size_t kHugeMinFile = 4 * kHugePage;  // smaller files are mapped as they come

// The whole file read-only at a 2 MiB-aligned address (so that file offset and address agree modulo
// 2 MiB), or MAP_FAILED with errno set. Files under kHugeMinFile go wherever mmap puts them.
void* map_file(int fd, size_t size) {
    if (size < kHugeMinFile) return ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    // Reserve size + 2 MiB of address space, map the file over its first aligned address, and give
    // back the reservation's ends.
    void* r = ::mmap(nullptr, size + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) return r;
    uint8_t* const lo = static_cast<uint8_t*>(r);
    uint8_t* const at = lo + (kHugePage - reinterpret_cast<uintptr_t>(lo) % kHugePage) % kHugePage;
    void* p = ::mmap(at, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        ::munmap(r, size + kHugePage);
        errno = e;
        return p;
    }
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    auto page_up = [page](size_t n) { return (n + page - 1) / page * page; };
    uint8_t* const map_end = at + page_up(size), *const r_end = lo + page_up(size + kHugePage);
    if (at > lo) ::munmap(lo, size_t(at - lo));
    if (r_end > map_end) ::munmap(map_end, size_t(r_end - map_end));
    ::madvise(p, size, MADV_HUGEPAGE);  // best effort: EINVAL where the kernel has no THP
    return p;
}

// Touches one byte of each whole 2 MiB region of a fresh mapping from map_file that the page cache
// already holds any page of (mincore), so that the kernel maps it as it is cached (a cached huge
// folio through one 2 MiB entry, small folios through small ones); reads nothing from disk. Returns
// how many regions it touched.
size_t touch_cached_regions(const uint8_t* base, size_t size) {
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> cached(kHugePage / page);
    size_t touched = 0;
    for (size_t r = 0; r < size / kHugePage; r++) {
        const uint8_t* at = base + r * kHugePage;
        if (::mincore(const_cast<uint8_t*>(at), kHugePage, cached.data()) != 0) continue;
        if (std::none_of(cached.begin(), cached.end(), [](unsigned char c) { return c & 1; })) continue;
        const volatile uint8_t* v = at;
        (void)v[0];
        touched++;
    }
    return touched;
}

// Whether the 2 MiB at `at` (aligned, inside a fresh mapping from map_file with nothing else
// touched) come in as one huge page: touches them and asks /proc/self/smaps.
bool huge_page_at(const uint8_t* base, const uint8_t* at) {
    const volatile uint8_t* v = at;
    (void)v[0];
    return huge_page_bytes_at(base) >= kHugePage;
}

}  // namespace

size_t huge_page_bytes_at(const void* addr) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    std::ifstream smaps("/proc/self/smaps");
    bool in_vma = false;
    size_t bytes = 0;
    for (std::string line; std::getline(smaps, line);) {
        // A mapping's first line starts with its address range in lower-case hex ("7f12...-7f13... r--p");
        // the fields after it start with a capitalized name ("FilePmdMapped:   2048 kB").
        const bool is_head = !line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
                             !std::isupper(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ');
        if (is_head) {
            if (in_vma) break;
            char* end = nullptr;
            const uintptr_t lo = std::strtoull(line.c_str(), &end, 16);
            const uintptr_t hi = *end == '-' ? std::strtoull(end + 1, nullptr, 16) : 0;
            in_vma = lo <= a && a < hi;
        } else if (in_vma) {
            for (const char* field : {"FilePmdMapped:", "AnonHugePages:"})
                if (line.rfind(field, 0) == 0)
                    bytes += size_t(std::strtoull(line.c_str() + std::strlen(field), nullptr, 10)) * 1024;
        }
    }
    return bytes;
}

std::string read_whole_file(const std::string& path, const std::string& what, size_t max_bytes) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(path + ": cannot open " + what + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const bool dir = S_ISDIR(st.st_mode);
        ::close(fd);
        throw Error(path + ": " + what + " is " + (dir ? "a directory" : "not a regular file"));
    }
    if (size_t(st.st_size) > max_bytes) {
        ::close(fd);
        throw Error(path + ": " + what + " is " + std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes) + " this reads");
    }
    std::string bytes(size_t(st.st_size), '\0');
    size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int e = errno;
            ::close(fd);
            throw Error(path + ": cannot read " + what + (n < 0 ? std::string(": ") + std::strerror(e) : ": it shrank"));
        }
        got += size_t(n);
    }
    ::close(fd);
    return bytes;
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (it is then refused
    // as not a regular file); for a regular file it changes nothing.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        throw Error(path + ": cannot stat: " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + (S_ISDIR(st.st_mode) ? ": is a directory, not a regular file" : ": not a regular file"));
    }
    if (st.st_size == 0) {
        ::close(fd);
        throw Error(path + ": file is empty");
    }
    size_t size = size_t(st.st_size);
    void* p = map_file(fd, size);
    if (p != MAP_FAILED && size >= kHugeMinFile) {
        // Any of the file cached in small pages? If the kernel can give huge ones (it already did to
        // some region, or one region dropped and read again comes back huge), drop the whole file.
        const auto* base = static_cast<const uint8_t*>(p);
        const size_t cached = touch_cached_regions(base, size);
        const size_t huge = huge_page_bytes_at(base);
        if (huge < cached * kHugePage) {
            ::munmap(p, size);
            ::fdatasync(fd);  // pages still to be written back (a file just copied) are not dropped
            bool kernel_can = huge > 0;
            if (!kernel_can) {
                ::posix_fadvise(fd, off_t(kHugePage), off_t(kHugePage), POSIX_FADV_DONTNEED);
                p = map_file(fd, size);
                base = static_cast<const uint8_t*>(p);
                kernel_can = p != MAP_FAILED && huge_page_at(base, base + kHugePage);
                if (p != MAP_FAILED) ::munmap(p, size);
            }
            if (kernel_can) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            p = map_file(fd, size);
        }
    }
    int e = errno;
    ::close(fd);  // the mapping stays valid after close
    if (p == MAP_FAILED) throw Error(path + ": cannot mmap " + std::to_string(size) + " bytes: " + std::strerror(e));
    std::shared_ptr<MappedFile> m(new MappedFile());
    m->path_ = path;
    m->data_ = static_cast<const uint8_t*>(p);
    m->size_ = size;
    return m;
}

size_t MappedFile::huge_page_bytes() const { return huge_page_bytes_at(data_); }

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ridge
