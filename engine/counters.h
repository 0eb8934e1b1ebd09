// Counters: FLOPs and bytes summed per kind of op (from the Cost each kernel returns), so a run
// can say what it did and how close it came to the machine's ceilings. Plain data, passed in.
#pragma once
#include <array>
#include <cstddef>

#include "kernels/cpu/cost.h"

namespace ridge {

enum class Op { Embed, RmsNorm, Matmul, Rope, KVStore, Attention, Swiglu, Add, Logits, Count };

inline const char* op_name(Op op) {
    switch (op) {
        case Op::Embed: return "embed";
        case Op::RmsNorm: return "rmsnorm";
        case Op::Matmul: return "matmul";
        case Op::Rope: return "rope";
        case Op::KVStore: return "kv_store";
        case Op::Attention: return "attention";
        case Op::Swiglu: return "swiglu";
        case Op::Add: return "add";
        case Op::Logits: return "logits";
        case Op::Count: break;
    }
    return "?";
}

struct OpCounters {
    std::array<cpu::Cost, size_t(Op::Count)> by_op{};

    void add(Op op, const cpu::Cost& c) { by_op[size_t(op)] += c; }
    cpu::Cost total() const {
        cpu::Cost t;
        for (const cpu::Cost& c : by_op) t += c;
        return t;
    }
    OpCounters& operator+=(const OpCounters& o) {
        for (size_t i = 0; i < by_op.size(); i++) by_op[i] += o.by_op[i];
        return *this;
    }
};

}  // namespace ridge
