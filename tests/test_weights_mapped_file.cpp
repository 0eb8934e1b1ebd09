// MappedFile: the bytes of the file at the mapping, errors naming the path, and large files mapped
// at a 2 MiB boundary (so the kernel may back them with huge pages; weights/mapped_file.cpp); and
// huge_page_bytes_at, which the bandwidth probe reads for its anonymous buffer too.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "weights/error.h"
#include "weights/mapped_file.h"

namespace {

using ridge::MappedFile;

struct TempFile {
    std::string path;
    explicit TempFile(const std::vector<uint8_t>& bytes) {
        char name[] = "/tmp/ridge-mapped-XXXXXX";
        const int fd = mkstemp(name);
        EXPECT_GE(fd, 0);
        ::close(fd);
        path = name;
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    ~TempFile() { std::remove(path.c_str()); }
};

std::vector<uint8_t> pattern(size_t n) {
    std::vector<uint8_t> v(n);
    uint32_t x = 12345;
    for (auto& b : v) b = uint8_t((x = x * 1664525u + 1013904223u) >> 24);
    return v;
}

constexpr size_t kMiB = size_t(1) << 20;

TEST(MappedFile, SmallFileHoldsItsBytes) {
    const auto bytes = pattern(1000);
    TempFile f(bytes);
    const auto m = MappedFile::open(f.path);
    ASSERT_EQ(m->size(), bytes.size());
    EXPECT_EQ(std::vector<uint8_t>(m->data(), m->data() + m->size()), bytes);
    EXPECT_EQ(m->path(), f.path);
}

// 10 MiB and a bit: over the 8 MiB from which files are placed for huge pages. Opened twice: the
// second open finds the page cache as the first left it (huge pages or not) and must still see the
// file's bytes, whichever way open() went (mapped once, or dropped from the cache and mapped again).
TEST(MappedFile, LargeFileStartsOnA2MiBBoundaryAndHoldsItsBytes) {
    const auto bytes = pattern(10 * kMiB + 123);
    TempFile f(bytes);
    for (int round = 0; round < 2; round++) {
        const auto m = MappedFile::open(f.path);
        ASSERT_EQ(m->size(), bytes.size());
        EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % (2 * kMiB), 0u) << "round " << round;
        EXPECT_EQ(std::vector<uint8_t>(m->data(), m->data() + m->size()), bytes) << "round " << round;
        // What the kernel backs with huge pages is its choice; never more than the mapping.
        EXPECT_LE(m->huge_page_bytes(), 12 * kMiB);
        EXPECT_EQ(m->huge_page_bytes() % (2 * kMiB), 0u);
    }
}

// A file of 8 whole 2 MiB regions left in the page cache with region 1 in a huge folio and regions
// 2-7 in 4 KiB ones (read with readahead off), as another program's reads can leave a model: open()
// must find the small ones, not just look at region 1, and the file must come back in huge pages.
// Skipped where the kernel or the filesystem under /tmp gives files no huge pages.
TEST(MappedFile, FileCachedPartlyInSmallPagesComesBackHuge) {
    const size_t region = 2 * kMiB, regions = 8;
    const auto bytes = pattern(regions * region);
    TempFile f(bytes);
    const int fd = ::open(f.path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    {
        // Region 1 read through an aligned mapping marked for huge pages, as open() maps.
        void* r = ::mmap(nullptr, (regions + 1) * region, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(r, MAP_FAILED);
        uint8_t* const at = static_cast<uint8_t*>(r) + (region - reinterpret_cast<uintptr_t>(r) % region) % region;
        ASSERT_NE(::mmap(at, regions * region, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0), MAP_FAILED);
        ::madvise(at, regions * region, MADV_HUGEPAGE);
        EXPECT_EQ(at[region], bytes[region]);
        const size_t huge = ridge::huge_page_bytes_at(at);
        ::munmap(r, (regions + 1) * region);
        if (huge != region) {
            ::close(fd);
            GTEST_SKIP() << "this kernel or filesystem gives files no huge pages";
        }
    }
    ::close(fd);
    // A new open file: the mapping's readahead state (huge folios ahead) stays with the old one.
    const int rd = ::open(f.path.c_str(), O_RDONLY);
    ASSERT_GE(rd, 0);
    ASSERT_EQ(::posix_fadvise(rd, 0, 0, POSIX_FADV_RANDOM), 0);
    std::vector<uint8_t> page(4096);
    for (size_t off = 2 * region; off < bytes.size(); off += page.size())
        ASSERT_EQ(::pread(rd, page.data(), page.size(), off_t(off)), ssize_t(page.size()));
    ::close(rd);

    const auto m = MappedFile::open(f.path);
    EXPECT_EQ(std::vector<uint8_t>(m->data(), m->data() + m->size()), bytes);
    // All 8 regions here; at least 6 allowed, should memory be too fragmented for one or two. The
    // open() that looked at region 1 alone left 3 (6 MiB).
    EXPECT_GE(m->huge_page_bytes(), bytes.size() - 2 * region);
}

// Three 4 MiB regions of one anonymous mapping, the middle one kept out of huge pages, the outer
// two offered them; all touched. An address names the mapping that holds it, wherever in it it
// falls, and the middle one has no 2 MiB page whatever its neighbours got.
TEST(HugePageBytesAt, NamesTheMappingThatHoldsTheAddress) {
    const size_t region = 4 * kMiB, size = 3 * region;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    uint8_t* const base = static_cast<uint8_t*>(p);
    ::madvise(base, region, MADV_HUGEPAGE);  // best effort: the kernel may have no THP
    ASSERT_EQ(::madvise(base + region, region, MADV_NOHUGEPAGE), 0);
    ::madvise(base + 2 * region, region, MADV_HUGEPAGE);
    for (size_t i = 0; i < size; i += 4096) base[i] = uint8_t(i);
    EXPECT_EQ(ridge::huge_page_bytes_at(base + region), 0u);
    EXPECT_EQ(ridge::huge_page_bytes_at(base + region + region / 2), 0u);
    for (uint8_t* at : {base, base + 2 * region}) {
        const size_t got = ridge::huge_page_bytes_at(at);
        EXPECT_LE(got, region);  // the outer regions are mappings of their own, 4 MiB each
        EXPECT_EQ(got % (2 * kMiB), 0u);
        EXPECT_EQ(ridge::huge_page_bytes_at(at + region - 1), got);  // its last byte names it too
        std::printf("huge pages at +%zu MiB: %zu MiB\n", size_t(at - base) / kMiB, got / kMiB);
    }
    ::munmap(p, size);
    EXPECT_EQ(ridge::huge_page_bytes_at(base + region), 0u);  // no mapping there any more
}

TEST(MappedFile, ErrorsNameThePath) {
    auto message = [](const std::string& path) {
        try {
            MappedFile::open(path);
        } catch (const ridge::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message("/nonexistent/x.gguf").rfind("/nonexistent/x.gguf: cannot open", 0), 0u);
    EXPECT_EQ(message("/tmp"), "/tmp: is a directory, not a regular file");
    TempFile empty({});
    EXPECT_EQ(message(empty.path), empty.path + ": file is empty");
}

// A FIFO, a directory or a device given as a file is refused at once: opening a FIFO to read would
// wait for a writer that never comes.
TEST(ReadWholeFile, RefusesWhatIsNotARegularFileWithoutWaiting) {
    const std::string fifo = ::testing::TempDir() + "/ridge_test_fifo";
    ::unlink(fifo.c_str());
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    auto message = [](auto&& open) {
        try {
            open();
        } catch (const ridge::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message([&] { ridge::read_whole_file(fifo, "text file"); }), fifo + ": text file is not a regular file");
    EXPECT_EQ(message([&] { MappedFile::open(fifo); }), fifo + ": not a regular file");
    EXPECT_EQ(message([&] { ridge::read_whole_file("/tmp", "prompt file"); }), "/tmp: prompt file is a directory");
    EXPECT_EQ(message([&] { ridge::read_whole_file("/dev/null", "prompt file"); }), "/dev/null: prompt file is not a regular file");
    EXPECT_EQ(message([&] { ridge::read_whole_file("/nonexistent/p.txt", "prompt file"); }).rfind("/nonexistent/p.txt: cannot open prompt file", 0), 0u);
    ::unlink(fifo.c_str());

    TempFile text({'a', 'b', '\n'});
    EXPECT_EQ(ridge::read_whole_file(text.path, "text file"), "ab\n");
    EXPECT_EQ(message([&] { ridge::read_whole_file(text.path, "text file", 2); }),
              text.path + ": text file is 3 bytes, more than the 2 this reads");
}

}  // namespace
