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
// an ordinary (blocking) stream: DeviceBuffer's copies and fills, which run on the legacy default
// stream, are ordered with the kernels queued on it, before and after, without extra syncs.
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

// Device memory of a fixed size, freed with the object. Copies in and out are synchronous with
// respect to the host (they finish before returning) unless a stream is given.
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
    // Every byte set to `value` (tests poison outputs before a kernel to see that it wrote them all).
    void fill_bytes(uint8_t value);

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// bytes from device memory at src to host dst, after everything queued before it (synchronous).
void copy_to_host(void* dst, const void* src, size_t bytes);

}  // namespace ridge::cuda
