// KVCache: every layer's keys and values, allocated once for n_ctx tokens, kept as a pool of
// fixed-size blocks. Each sequence has a block table and a length; it grows a block at a time,
// and freeing it gives its blocks back, so sequences can start, grow and end independently.
// Blocks are reference-counted: a sequence may also take whole blocks that hold another's tokens
// (share(), for an identical prompt prefix; see prefix_cache.h), and a block returns to the free
// list when its last holder lets it go. A shared block is never written again.
// Size: 2 * n_layers * kv_dim * bytes(type) per token (see bytes()).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/types.h"
#include "weights/config.h"
#include "weights/mapped_file.h"
#include "weights/types.h"

namespace ridge {

class KVCache {
public:
    static constexpr int kDefaultBlockSize = 16;

    // Room for pool_tokens tokens in all (rounded up to whole blocks; 0 means n_ctx), shared by the
    // sequences, each of which may hold up to n_ctx tokens; type F32 or F16.
    // on_gpu: the keys and values live in CUDA device memory (an Engine on --device cuda);
    // layer() then gives device pointers. ridge::Error when this build or machine has no CUDA.
    KVCache(const Config& config, int n_ctx, DType type, int block_size = kDefaultBlockSize, int pool_tokens = 0,
            bool on_gpu = false);

    // The same sequences and block tables without the keys and values (no memory): for planning a
    // pass on paper (ridge explain runs forward() through a costs-only backend). layer() then gives
    // views with null k and v.
    static KVCache layout_only(const Config& config, int n_ctx, DType type);

    int n_ctx() const { return n_ctx_; }            // most tokens any one sequence may hold
    DType type() const { return type_; }
    int block_size() const { return block_size_; }
    size_t bytes() const { return bytes_; }          // the whole allocation
    static constexpr size_t kAlign = kHugePage;      // the pool's start: a huge page boundary
    static size_t bytes_per_token(const Config& config, DType type);

    // Sequences. Ids are small integers, reused after free_sequence.
    int new_sequence();
    void free_sequence(int seq);
    bool has_sequence(int seq) const;
    int length(int seq) const;  // tokens stored so far (the next position)
    // Makes room for n more tokens of seq and returns the first new position; ridge::Error when
    // the sequence would pass n_ctx or the pool has no free block (the cache is unchanged then).
    int append(int seq, int n);
    // New blocks append(seq, n) would take from the free list.
    int blocks_to_append(int seq, int n) const;
    // Forgets the tokens of seq from position n on (keeps its blocks); ridge::Error when position n
    // lies in a block another holder shares (that block must not be rewritten).
    void truncate(int seq, int n);
    int free_tokens() const;  // tokens that could still be appended to a new sequence
    int n_blocks() const { return n_blocks_; }
    int free_blocks() const { return int(free_blocks_.size()); }

    // Sharing. share() appends whole blocks that hold the next tokens of seq (its length must be a
    // multiple of the block size; the blocks must be in use) and takes a reference to each:
    // seq's length grows by blocks.size() * block_size. retain() and release() take and drop a
    // reference held by something other than a sequence (the prefix cache's index).
    void share(int seq, const std::vector<int32_t>& blocks);
    void retain(int32_t block);
    void release(int32_t block);
    int refs(int32_t block) const { return refs_[size_t(block)]; }  // 0: free

    const std::vector<int32_t>& block_table(int seq) const;  // (ceil(length / block_size))
    int64_t slot(int seq, int pos) const;                     // block_table[pos / B] * B + pos % B

    KVLayer layer(int l);  // the views the kernels take for layer l
    bool on_gpu() const { return device_storage_ != nullptr; }

private:
    KVCache(const Config& config, int n_ctx, DType type, int block_size, int pool_tokens, bool on_gpu, bool allocate);
    struct Sequence {
        bool alive = false;
        int length = 0;
        std::vector<int32_t> blocks;  // block table
    };
    const Sequence& seq_ref(int seq) const;  // ridge::Error for an unknown sequence
    Sequence& seq_mut(int seq);

    int n_layers_ = 0;
    int kv_dim_ = 0;        // n_kv_heads * head_dim
    int n_ctx_ = 0;
    int block_size_ = 0;
    int n_blocks_ = 0;
    DType type_ = DType::F32;
    size_t elem_bytes_ = 4;
    size_t bytes_ = 0;
    struct Free {
        void operator()(uint8_t* p) const;
    };
    std::unique_ptr<uint8_t, Free> storage_;  // (n_layers, 2 [k, v], n_blocks * block_size, kv_dim) elements
    std::shared_ptr<uint8_t> device_storage_;  // the same on the GPU, instead of storage_ (on_gpu)
    std::vector<int32_t> free_blocks_;    // stack of unused block ids
    std::vector<int32_t> refs_;           // (n_blocks) holders of each block: sequences and retain()s
    std::vector<Sequence> seqs_;
};

}  // namespace ridge
