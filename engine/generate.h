// The generation loop: sample a token from the last logits, hand it to the caller, feed it back,
// until -n tokens, an end-of-generation token (or a sampled BOS, which starts a new text), or the
// end of the context. Printing is the caller's job (on_token).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace ridge {

enum class StopReason { Length, EndOfGeneration, ContextFull, Caller };  // Caller: on_token said stop

struct GenerateResult {
    int n_generated = 0;     // tokens handed to on_token
    StopReason stop = StopReason::Length;
    int32_t unfed = -1;      // the last sampled token that is not in the KV cache (-1 if none)
};

// `logits` are those of the last token already fed to seq; `history` holds the sequence's tokens
// so far and gets the generated ones appended. max_new < 0 means until the context ends. on_token
// returns false to end the generation there (a stop string, say): StopReason::Caller, that token
// counted and left unfed.
GenerateResult generate(Session& session, int seq, Sampler& sampler, const Tokenizer& tok, const float* logits,
                        std::vector<int32_t>& history, int max_new, const std::function<bool(int32_t)>& on_token);

}  // namespace ridge
