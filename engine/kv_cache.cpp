// KVCache: the block pool, per-sequence block tables, and the per-layer views for the kernels.
#include "engine/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine/gpu.h"
#include "weights/error.h"

namespace ridge {

size_t KVCache::bytes_per_token(const Config& c, DType type) {
    const size_t eb = type == DType::F16 ? 2 : 4;
    return 2 * size_t(c.n_layers) * size_t(c.kv_dim()) * eb;
}

KVCache KVCache::layout_only(const Config& c, int n_ctx, DType type) {
    return KVCache(c, n_ctx, type, kDefaultBlockSize, 0, false, /*allocate=*/false);
}

KVCache::KVCache(const Config& c, int n_ctx, DType type, int block_size, int pool_tokens, bool on_gpu)
    : KVCache(c, n_ctx, type, block_size, pool_tokens, on_gpu, /*allocate=*/true) {}

KVCache::KVCache(const Config& c, int n_ctx, DType type, int block_size, int pool_tokens, bool on_gpu, bool allocate)
    : n_layers_(c.n_layers), kv_dim_(c.kv_dim()), n_ctx_(n_ctx), block_size_(block_size), type_(type) {
    switch (type) {
        case DType::F32: elem_bytes_ = 4; break;
        case DType::F16: elem_bytes_ = 2; break;
        default:
            throw Error("KV cache: type " + std::string(dtype_name(type)) + " is not supported (use f32 or f16)");
    }
    if (n_ctx <= 0 || block_size <= 0 || pool_tokens < 0)
        throw Error("KV cache: context " + std::to_string(n_ctx) + ", block size " + std::to_string(block_size) +
                    " and pool " + std::to_string(pool_tokens) + " must be positive");
    const int64_t pool = pool_tokens > 0 ? pool_tokens : n_ctx;
    n_blocks_ = int((pool + block_size - 1) / block_size);
    bytes_ = size_t(n_layers_) * 2 * size_t(n_blocks_) * size_t(block_size_) * size_t(kv_dim_) * elem_bytes_;
    // Left uninitialized: every slot is written before it is read. On the CPU the pool starts on a
    // 2 MiB boundary and asks for huge pages (best effort: where the kernel has transparent huge
    // pages), so that a layer's keys and values take a few TLB entries instead of one per 4 KiB,
    // which makes decode's attention faster (docs/measurements/source-comment-history.md).
    if (!allocate) {
        // layout only: no keys or values
    } else if (on_gpu) {
        device_storage_ = gpu::device_alloc(bytes_);
    } else {
        // Rounded up to whole 2 MiB (aligned_alloc wants a multiple): a tiny cache holds 2 MiB.
        const size_t rounded = (bytes_ + kAlign - 1) / kAlign * kAlign;
        storage_.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded)));
        if (!storage_) throw Error("KV cache: cannot allocate " + std::to_string(bytes_) + " bytes");
        ::madvise(storage_.get(), rounded, MADV_HUGEPAGE);
    }
    free_blocks_.reserve(size_t(n_blocks_));
    for (int b = n_blocks_ - 1; b >= 0; b--) free_blocks_.push_back(b);  // hand out block 0 first
    refs_.assign(size_t(n_blocks_), 0);
}

void KVCache::Free::operator()(uint8_t* p) const { std::free(p); }

int KVCache::new_sequence() {
    for (size_t i = 0; i < seqs_.size(); i++)
        if (!seqs_[i].alive) {
            seqs_[i] = Sequence{true, 0, {}};
            return int(i);
        }
    seqs_.push_back(Sequence{true, 0, {}});
    return int(seqs_.size() - 1);
}

const KVCache::Sequence& KVCache::seq_ref(int seq) const {
    if (seq < 0 || size_t(seq) >= seqs_.size() || !seqs_[size_t(seq)].alive)
        throw Error("KV cache: no sequence " + std::to_string(seq));
    return seqs_[size_t(seq)];
}

KVCache::Sequence& KVCache::seq_mut(int seq) {
    seq_ref(seq);  // validates
    return seqs_[size_t(seq)];
}

bool KVCache::has_sequence(int seq) const {
    return seq >= 0 && size_t(seq) < seqs_.size() && seqs_[size_t(seq)].alive;
}

void KVCache::free_sequence(int seq) {
    Sequence& s = seq_mut(seq);
    for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) release(*it);
    s = Sequence{};
}

void KVCache::retain(int32_t block) {
    if (block < 0 || block >= n_blocks_ || refs_[size_t(block)] == 0)
        throw Error("KV cache: block " + std::to_string(block) + " is not in use");
    refs_[size_t(block)]++;
}

void KVCache::release(int32_t block) {
    if (block < 0 || block >= n_blocks_ || refs_[size_t(block)] == 0)
        throw Error("KV cache: block " + std::to_string(block) + " is not in use");
    if (--refs_[size_t(block)] == 0) free_blocks_.push_back(block);
}

void KVCache::share(int seq, const std::vector<int32_t>& blocks) {
    Sequence& s = seq_mut(seq);
    if (s.length % block_size_ != 0 || size_t(s.length / block_size_) != s.blocks.size())
        throw Error("KV cache: sequence " + std::to_string(seq) + " of length " + std::to_string(s.length) +
                    " does not end on a block boundary");
    const int64_t n = int64_t(blocks.size()) * block_size_;
    if (s.length + n > n_ctx_)
        throw Error("context full: sequence " + std::to_string(seq) + " holds " + std::to_string(s.length) +
                    " tokens, " + std::to_string(n) + " more would pass the context of " + std::to_string(n_ctx_));
    for (int32_t b : blocks) retain(b);
    s.blocks.insert(s.blocks.end(), blocks.begin(), blocks.end());
    s.length += int(n);
}

int KVCache::length(int seq) const { return seq_ref(seq).length; }

int KVCache::append(int seq, int n) {
    Sequence& s = seq_mut(seq);
    if (n < 0) throw Error("KV cache: cannot append " + std::to_string(n) + " tokens");
    if (int64_t(s.length) + n > n_ctx_)
        throw Error("context full: sequence " + std::to_string(seq) + " holds " + std::to_string(s.length) +
                    " tokens, " + std::to_string(n) + " more would pass the context of " + std::to_string(n_ctx_));
    const int new_blocks = blocks_to_append(seq, n);
    if (new_blocks > int(free_blocks_.size()))
        throw Error("KV cache full: " + std::to_string(new_blocks) + " more blocks needed, " +
                    std::to_string(free_blocks_.size()) + " free of " + std::to_string(n_blocks_));
    for (int i = 0; i < new_blocks; i++) {
        s.blocks.push_back(free_blocks_.back());
        refs_[size_t(free_blocks_.back())] = 1;
        free_blocks_.pop_back();
    }
    const int first = s.length;
    s.length += n;
    return first;
}

int KVCache::blocks_to_append(int seq, int n) const {
    const Sequence& s = seq_ref(seq);
    const int64_t blocks_needed = (int64_t(s.length) + n + block_size_ - 1) / block_size_;
    return int(std::max<int64_t>(0, blocks_needed - int64_t(s.blocks.size())));
}

void KVCache::truncate(int seq, int n) {
    Sequence& s = seq_mut(seq);
    if (n < 0 || n > s.length)
        throw Error("KV cache: cannot truncate sequence " + std::to_string(seq) + " of " + std::to_string(s.length) +
                    " tokens to " + std::to_string(n));
    for (size_t b = size_t(n / block_size_); n < s.length && b < s.blocks.size(); b++)
        if (refs_[size_t(s.blocks[b])] > 1)
            throw Error("KV cache: position " + std::to_string(n) + " of sequence " + std::to_string(seq) +
                        " is in a shared block, which must not be rewritten");
    s.length = n;
}

int KVCache::free_tokens() const {
    const int64_t t = int64_t(free_blocks_.size()) * block_size_;
    return int(t < n_ctx_ ? t : n_ctx_);
}

const std::vector<int32_t>& KVCache::block_table(int seq) const { return seq_ref(seq).blocks; }

int64_t KVCache::slot(int seq, int pos) const {
    const Sequence& s = seq_ref(seq);
    if (pos < 0 || pos >= s.length)
        throw Error("KV cache: position " + std::to_string(pos) + " is outside sequence " + std::to_string(seq) +
                    " of length " + std::to_string(s.length));
    return kv_slot(s.blocks.data(), pos, block_size_);
}

KVLayer KVCache::layer(int l) {
    const size_t n_slots = size_t(n_blocks_) * size_t(block_size_);
    const size_t half = n_slots * size_t(kv_dim_) * elem_bytes_;  // bytes of one layer's K (or V)
    uint8_t* base = on_gpu() ? device_storage_.get() : storage_.get();
    if (!base) return KVLayer{type_, nullptr, nullptr, int64_t(n_slots), kv_dim_, block_size_};  // layout only
    base += size_t(l) * 2 * half;
    return KVLayer{type_, base, base + half, int64_t(n_slots), kv_dim_, block_size_};
}

}  // namespace ridge
