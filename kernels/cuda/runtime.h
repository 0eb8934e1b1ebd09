// The CUDA runtime as the rest of ridge sees it: is there a device, what is it, a stream to queue
// work on, and device memory that frees itself. Plain C++ (no CUDA header), so that engine/, tools/
// and the tests include it with the host compiler; runtime.cu implements it. Every CUDA call
// behind these functions is checked: a failure throws ridge::Error naming the call, file, line and
// CUDA's error (see check.cuh).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ridge::cuda {

// Number of usable CUDA devices; 0 when there is no device or no driver (never throws).
int device_count();
// Why device_count() is 0, in one line ("no CUDA driver: cudaErrorInsufficientDriver ..."); empty
// when there is a device.
std::string no_device_reason();

struct DeviceInfo {
    std::string name;               // "NVIDIA H200"
    int cc_major = 0, cc_minor = 0; // compute capability (9.0 for Hopper)
    int sm_count = 0;               // streaming multiprocessors
    size_t global_bytes = 0;        // device memory
    size_t l2_bytes = 0;            // L2 cache
    size_t smem_per_block_optin = 0;// the most shared memory one block may ask for
    int clock_khz = 0;              // SM clock
    int mem_bus_bits = 0;           // memory bus width
};
DeviceInfo device_info(int device = 0);
// Makes `device` current for this host thread; ridge::Error when it does not exist.
void set_device(int device);
// The same without the existence check, for every call on a thread that may not have set it (cheap).
void use_device(int device);

// A CUDA stream. Kernels take one by reference and queue on it; nothing waits until sync(). It is
// a non-blocking stream: it does not wait for the legacy default stream, nor that one for it, so
// every copy and fill that belongs to a pass is queued on it too (the *_async calls below), and
// the synchronous calls wait for the whole device before and after their work.
class Stream {
public:
    Stream();
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    void* handle() const { return handle_; }  // a cudaStream_t
    void sync() const;                        // waits for everything queued; throws on a device error
private:
    void* handle_ = nullptr;
};

// Page-locked host memory of a fixed size, freed with the object: the staging of a pass's uploads
// (tokens, positions, slots, block tables) and of its logits download, so that those copies are
// truly asynchronous on the stream (from pageable memory the driver copies through a bounce
// buffer of its own first, holding the host thread).
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(size_t bytes);
    ~PinnedBuffer();
    PinnedBuffer(PinnedBuffer&& o) noexcept;
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    void* data() const { return ptr_; }
    template <class T>
    T* as() const { return static_cast<T*>(ptr_); }
    size_t size() const { return bytes_; }
    // At least `bytes`, reallocating (contents lost) when smaller. Call only while no queued copy
    // still reads or writes it.
    void reserve(size_t bytes);

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// Device memory of a fixed size, freed with the object.
// The plain calls (upload, download, fill_bytes) are for setup and tests: they wait for the whole
// device first, do their copy, and wait again, so they are ordered with every stream and their
// host memory is free when they return. The *_async calls queue on a stream, in order with its
// kernels: the host memory must stay as it is (upload) or unread (download) until the stream has
// reached them (a sync); from a PinnedBuffer they do not hold the host thread.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& o) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* data() const { return ptr_; }
    template <class T>
    T* as() const { return static_cast<T*>(ptr_); }
    size_t size() const { return bytes_; }

    // bytes from host src to this buffer at offset (ridge::Error when it would not fit).
    void upload(const void* src, size_t bytes, size_t offset = 0);
    void upload_async(const void* src, size_t bytes, const Stream& s, size_t offset = 0);
    // bytes from this buffer at offset to host dst.
    void download(void* dst, size_t bytes, size_t offset = 0) const;
    void download_async(void* dst, size_t bytes, const Stream& s, size_t offset = 0) const;
    // Every byte set to `value` (tests poison outputs before a kernel to see that it wrote them all).
    void fill_bytes(uint8_t value);

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// bytes from device memory at src to host dst, after everything queued on any stream (synchronous).
void copy_to_host(void* dst, const void* src, size_t bytes);

}  // namespace ridge::cuda
