// ByteTokenizer: the stand-in tokenizer of synthetic models (weights/synthetic.h), which carry
// no vocabulary. Ids 0..255 are the bytes themselves, 256 is BOS "<s>", 257 and 258 are the
// ChatML markers "<|im_start|>" and "<|im_end|>" (so `ridge chat` runs too), and every id above
// is an unused token that decodes to nothing, up to the model's n_vocab. A synthetic model's
// random weights make its text meaningless: this tokenizer exists so speed can be measured.
#pragma once
#include <memory>

#include "tokenizer/tokenizer.h"

namespace ridge {

constexpr int32_t kByteTokenizerBos = 256;
constexpr int32_t kByteTokenizerImStart = 257;
constexpr int32_t kByteTokenizerImEnd = 258;  // the only end-of-generation token

// A byte tokenizer of n_vocab ids (BOS added by default, as Llama models do); ridge::Error when
// n_vocab is below 259, the ids it defines.
std::unique_ptr<Tokenizer> make_byte_tokenizer(int n_vocab);

}  // namespace ridge
