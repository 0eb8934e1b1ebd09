// runtime.h on the CUDA runtime API: device query, streams and device buffers, every call checked.
#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/runtime.h"

namespace ridge::cuda {

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear it: "no driver" is an answer here, not a failure
        return 0;
    }
    return n;
}

std::string no_device_reason() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    cudaGetLastError();
    if (e == cudaSuccess && n > 0) return "";
    if (e == cudaSuccess) return "no CUDA device is present";
    if (e == cudaErrorInsufficientDriver)  // also what the runtime says when there is no driver at all
        return "no usable CUDA device: no NVIDIA driver, or one older than this CUDA runtime (cudaErrorInsufficientDriver)";
    return std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

DeviceInfo device_info(int device) {
    cudaDeviceProp p{};
    RIDGE_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    DeviceInfo d;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.sm_count = p.multiProcessorCount;
    d.global_bytes = p.totalGlobalMem;
    d.l2_bytes = size_t(p.l2CacheSize);
    d.smem_per_block_optin = p.sharedMemPerBlockOptin;
    RIDGE_CUDA_CHECK(cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, device));
    RIDGE_CUDA_CHECK(cudaDeviceGetAttribute(&d.mem_bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
    return d;
}

void set_device(int device) {
    const int n = device_count();
    if (device < 0 || device >= n)
        throw Error("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n) +
                    " device(s))" + (n == 0 ? ": " + no_device_reason() : std::string()));
    RIDGE_CUDA_CHECK(cudaSetDevice(device));
}

void use_device(int device) { RIDGE_CUDA_CHECK(cudaSetDevice(device)); }

Stream::Stream() {
    cudaStream_t s = nullptr;
    RIDGE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));  // not ordered with the legacy stream
    handle_ = s;
}
Stream::~Stream() {
    if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}
void Stream::sync() const { RIDGE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_))); }

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) RIDGE_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
}

PinnedBuffer::~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
        if (ptr_) cudaFreeHost(ptr_);
        ptr_ = std::exchange(o.ptr_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

void PinnedBuffer::reserve(size_t bytes) {
    if (bytes_ < bytes) *this = PinnedBuffer(bytes);
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) RIDGE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}
DeviceBuffer::~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        if (ptr_) cudaFree(ptr_);
        ptr_ = std::exchange(o.ptr_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

namespace {
void check_range(size_t offset, size_t bytes, size_t size, const char* what) {
    if (offset > size || bytes > size - offset)
        throw Error(std::string("DeviceBuffer::") + what + ": " + std::to_string(bytes) + " bytes at offset " +
                    std::to_string(offset) + " do not fit in " + std::to_string(size));
}
}  // namespace

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
    check_range(offset, bytes, bytes_, "upload");
    if (!bytes) return;
    RIDGE_CUDA_CHECK(cudaDeviceSynchronize());
    RIDGE_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice));
    RIDGE_CUDA_CHECK(cudaDeviceSynchronize());  // a small pageable copy may return before its DMA ends
}
void DeviceBuffer::upload_async(const void* src, size_t bytes, const Stream& s, size_t offset) {
    check_range(offset, bytes, bytes_, "upload_async");
    if (bytes)
        RIDGE_CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice,
                                         stream_of(s)));
}
void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
    check_range(offset, bytes, bytes_, "download");
    if (!bytes) return;
    RIDGE_CUDA_CHECK(cudaDeviceSynchronize());
    RIDGE_CUDA_CHECK(cudaMemcpy(dst, static_cast<uint8_t*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::download_async(void* dst, size_t bytes, const Stream& s, size_t offset) const {
    check_range(offset, bytes, bytes_, "download_async");
    if (bytes)
        RIDGE_CUDA_CHECK(cudaMemcpyAsync(dst, static_cast<uint8_t*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost,
                                         stream_of(s)));
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
    if (!bytes) return;
    RIDGE_CUDA_CHECK(cudaDeviceSynchronize());
    RIDGE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void DeviceBuffer::fill_bytes(uint8_t value) {
    if (!bytes_) return;
    RIDGE_CUDA_CHECK(cudaDeviceSynchronize());
    RIDGE_CUDA_CHECK(cudaMemset(ptr_, value, bytes_));
    RIDGE_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace ridge::cuda
