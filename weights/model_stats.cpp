// compute_stats: one pass over a model's tensors summing elements and bytes, by type and by what
// a decode step reads; the KV cache size per token from the Config.
#include "weights/model_stats.h"

#include <algorithm>

#include "weights/error.h"

namespace ridge {

ModelStats compute_stats(const ModelFile& m) {
    ModelStats s;
    const Config& c = m.config();
    const TensorView* emb = m.find("token_embd.weight");
    if (!emb) throw Error(m.path() + ": tensor 'token_embd.weight' not found");
    const TensorView* head = c.tied_output ? emb : m.find("output.weight");
    if (!head) throw Error(m.path() + ": tensor 'output.weight' not found (and the output is not tied)");

    for (const TensorView& t : m.tensors()) {
        s.n_params += t.n_elements();
        s.weight_bytes += t.nbytes;
        auto it = std::find_if(s.by_type.begin(), s.by_type.end(), [&](const TypeStats& x) { return x.type == t.type; });
        if (it == s.by_type.end()) {
            s.by_type.push_back(TypeStats{t.type, 0, 0, 0});
            it = s.by_type.end() - 1;
        }
        it->n_tensors += 1;
        it->n_elements += t.n_elements();
        it->bytes += t.nbytes;
        if (&t != emb) s.decode_bytes_per_token += t.nbytes;  // output.weight (if any) is among these
    }
    std::sort(s.by_type.begin(), s.by_type.end(),
              [](const TypeStats& a, const TypeStats& b) { return uint32_t(a.type) < uint32_t(b.type); });

    s.embedding_row_bytes = row_bytes(emb->type, emb->shape[0]);
    s.output_head_bytes = head->nbytes;
    s.decode_bytes_per_token += s.embedding_row_bytes;
    if (c.tied_output) s.decode_bytes_per_token += emb->nbytes;

    const uint64_t kv_values = 2ull * uint64_t(c.n_layers) * uint64_t(c.n_kv_heads) * uint64_t(c.head_dim);
    s.kv_bytes_per_token_f32 = kv_values * 4;
    s.kv_bytes_per_token_f16 = kv_values * 2;
    return s;
}

}  // namespace ridge
