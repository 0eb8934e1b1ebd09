// generate(): the sample -> emit -> feed loop (see generate.h).
#include "engine/generate.h"

namespace ridge {

GenerateResult generate(Session& session, int seq, Sampler& sampler, const Tokenizer& tok, const float* logits,
                        std::vector<int32_t>& history, int max_new, const std::function<bool(int32_t)>& on_token) {
    GenerateResult res;
    const int n_ctx = session.cache().n_ctx();
    while (max_new < 0 || res.n_generated < max_new) {
        const int32_t next = sampler.sample(logits, session.n_vocab(), history);
        if (tok.is_end_of_generation(next) || next == tok.bos_id()) {
            res.stop = StopReason::EndOfGeneration;
            res.unfed = next;
            return res;
        }
        history.push_back(next);
        const bool go_on = on_token(next);
        res.n_generated++;
        res.unfed = next;
        if (!go_on) {
            res.stop = StopReason::Caller;
            return res;
        }
        if (max_new >= 0 && res.n_generated == max_new) {
            res.stop = StopReason::Length;
            return res;
        }
        if (session.cache().length(seq) >= n_ctx) {
            res.stop = StopReason::ContextFull;
            return res;
        }
        logits = session.decode(seq, next);
        res.unfed = -1;
    }
    res.stop = StopReason::Length;
    return res;
}

}  // namespace ridge
