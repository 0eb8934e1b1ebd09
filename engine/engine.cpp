// Engine: the plan of every weight matrix, decided once from its type, the CPU's kernels and the
// run options, and the device weights when the model runs on a GPU.
#include "engine/engine.h"

#include <algorithm>
#include <map>

#include "engine/backend.h"
#include "kernels/cpu/matmul.h"
#include "weights/error.h"

namespace ridge {

namespace {

// The rows of one prompt from which the GPU takes its tiled kernel; shorter runs go through the
// matvec (cuda::kMatvecMaxRows rows a launch).
constexpr int64_t kGpuTiledMinRows = 16;

const char* int_form_name(cpu::IntForm f) {
    switch (f) {
        case cpu::IntForm::ymm: return "ymm";
        case cpu::IntForm::zmm_loads: return "zmm";
        case cpu::IntForm::zmm_gather: return "zmm, gathered scales";
    }
    return "?";
}

bool has_v3(DType t) {
    for (const cpu::MatmulVariant& v : cpu::matmul_variants())
        if (v.name == "v3_simd") return v.supports(t);
    return false;
}

MatmulPlan plan_matrix(const TensorView* w, const RunOptions& opt) {
    MatmulPlan p;
    p.w = w;
    if (opt.device == Device::Cuda) {
        p.tiled_min_rows = kGpuTiledMinRows;
        p.rows_kernel = "cuda matvec";
        p.tiled_kernel = "cuda v3_regblock";
        return p;
    }
    p.int_input = !opt.exact && cpu::has_int_kernel(w->type);
    p.tiled_min_rows = cpu::tiled_min_rows(w->type, p.int_input);
    if (p.int_input)
        p.rows_kernel = cpu::int_k_simd_types(w->type) ? "v4_int_k (int16 input)"
                                                       : std::string("v4_int (int16 input, ") +
                                                             int_form_name(cpu::int_form()) + ")";
    else
        p.rows_kernel = has_v3(w->type) ? "v3_simd" : "v1_rows";
    p.tiled_int = p.int_input && cpu::v7_types(w->type);
    p.tiled_kernel = p.tiled_int ? "v7_int_packed (int16 input)" : w->type == DType::F32 ? "v2_eigen" : "v6_packed";
    return p;
}

}  // namespace

Plan make_plan(const Model& model, const RunOptions& opt) {
    Plan plan;
    plan.opt = opt;
    plan.tiled_min_rows = opt.device == Device::Cuda ? kGpuTiledMinRows : cpu::kTiledMinRows;
    for (const LayerWeights& L : model.layers) {
        LayerPlan lp{plan_matrix(L.attn_q, opt),      plan_matrix(L.attn_k, opt), plan_matrix(L.attn_v, opt),
                     plan_matrix(L.attn_output, opt), plan_matrix(L.ffn_gate, opt), plan_matrix(L.ffn_up, opt),
                     plan_matrix(L.ffn_down, opt)};
        for (const MatmulPlan* p : {&lp.q, &lp.k, &lp.v, &lp.o, &lp.gate, &lp.up, &lp.down})
            plan.tiled_min_rows = std::max(plan.tiled_min_rows, p->tiled_min_rows);
        plan.layers.push_back(std::move(lp));
    }
    plan.output = plan_matrix(model.output, opt);
    return plan;
}

std::vector<std::string> describe_plan(const Plan& plan) {
    // Distinct (type, kernels) among the layers' matrices, in first-seen order, with their names.
    std::vector<std::pair<std::string, std::string>> kinds;  // (kernels line, matrices)
    auto add = [&](const std::string& name, const MatmulPlan& p) {
        const std::string line = std::string(dtype_name(p.w->type)) + ": rows " + p.rows_kernel + "; tiled " +
                                 p.tiled_kernel + " from " + std::to_string(plan.tiled_min_rows) + " rows";
        for (auto& [l, names] : kinds)
            if (l == line) {
                if (names.find(name) == std::string::npos) names += "," + name;
                return;
            }
        kinds.emplace_back(line, name);
    };
    for (const LayerPlan& lp : plan.layers) {
        add("q", lp.q), add("k", lp.k), add("v", lp.v), add("o", lp.o);
        add("gate", lp.gate), add("up", lp.up), add("down", lp.down);
    }
    std::vector<std::string> out;
    const std::string where = plan.opt.device == Device::Cuda ? "cuda" : "cpu";
    out.push_back("device " + where + (plan.opt.exact ? ", --exact (f32 activations)" : ""));
    for (const auto& [line, names] : kinds) out.push_back(names + " " + line);
    const MatmulPlan& o = plan.output;
    out.push_back("output " + std::string(dtype_name(o.w->type)) + ": rows " + o.rows_kernel + "; tiled " +
                  o.tiled_kernel + " from " + std::to_string(plan.tiled_min_rows) + " rows");
    return out;
}

Engine::Engine(const Model& model, const RunOptions& opt, bool place) : model_(model), plan_(make_plan(model, opt)) {
    if (place && opt.device == Device::Cuda) device_ = upload_weights(model, opt.gpu);
}

Engine::~Engine() = default;

std::unique_ptr<Backend> Engine::make_backend() const {
    if (on_gpu()) return make_cuda_backend(*this, device_);
    return make_cpu_backend(*this);
}

}  // namespace ridge
