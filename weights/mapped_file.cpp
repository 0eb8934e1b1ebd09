// MappedFile: open + fstat + mmap(PROT_READ, MAP_PRIVATE) of a whole file; errors name the path
// and the failing call with strerror(errno).
#include "weights/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weights/error.h"

namespace ridge {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        throw Error(path + ": cannot stat: " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    if (st.st_size == 0) {
        ::close(fd);
        throw Error(path + ": file is empty");
    }
    size_t size = size_t(st.st_size);
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    ::close(fd);  // the mapping stays valid after close
    if (p == MAP_FAILED) throw Error(path + ": cannot mmap " + std::to_string(size) + " bytes: " + std::strerror(e));
    std::shared_ptr<MappedFile> m(new MappedFile());
    m->path_ = path;
    m->data_ = static_cast<const uint8_t*>(p);
    m->size_ = size;
    return m;
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ridge
