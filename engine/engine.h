// Engine: a Model (weights and config) made ready to run. The plan of every weight matrix is
// decided here, once, at load: which kernel multiplies it row by row (16-bit integer input or f32),
// from how many rows of one prompt it takes the tiled kernel, and on which device. forward() only
// asks the plan; `ridge info` and `ridge explain` print it (describe_plan).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"

namespace ridge {

enum class Device { Cpu, Cuda };

// How a model runs: options the user passes (--exact, --device, --no-graph), not properties of
// the weights.
struct RunOptions {
    // false (the default, fast): a matrix whose type has an integer kernel (Q4_0, Q4_1, Q5_0, Q5_1,
    // Q8_0, Q4_K, Q5_K, Q6_K) takes its input rows quantized to 16-bit integers (kernels/cpu/matmul.h) for
    // decode rows and short prompts. true (--exact): every matmul takes f32 activations, the
    // reference arithmetic.
    bool exact = false;
    Device device = Device::Cpu;
    int gpu = 0;        // the CUDA device index
    bool graph = true;  // on a GPU: decode steps replay a captured CUDA graph (--no-graph: launch each kernel)
    // On a GPU, the wall time of every op (--profile): the stream is drained after each, and no
    // graph is replayed. Without it a GPU pass counts every op's FLOPs and bytes, and only the
    // pass's time. (On the CPU every counted op is timed.)
    bool profile = false;
};

// The plan of one weight matrix W (n, k) in Y = X . W^T.
struct MatmulPlan {
    const TensorView* w = nullptr;
    bool int_input = false;       // row-exact runs give it X as 16-bit integers (an integer kernel)
    bool tiled_int = false;       // tiled runs do too (the integer GEMM, where the build has it)
    int64_t tiled_min_rows = 0;   // a prompt chunk of this many rows is cheaper tiled than row by row
    std::string rows_kernel;      // the kernel of row-exact runs (decode rows, short prompts)
    std::string tiled_kernel;     // the kernel of tiled runs (prompt chunks)
};

struct LayerPlan {
    MatmulPlan q, k, v, o, gate, up, down;
};

struct Plan {
    RunOptions opt;
    // forward() cuts a batch into runs (engine/backend.h): a stretch of this many consecutive
    // positions of one sequence is a tiled run. One threshold for the whole model (the largest of
    // its matrices'), so that a prompt chunk is tiled or row-exact as a whole.
    int64_t tiled_min_rows = 0;
    std::vector<LayerPlan> layers;  // (n_layers)
    MatmulPlan output;              // the logits matrix
};

// Decides the plan of every matrix of `model` for these options (no device work).
Plan make_plan(const Model& model, const RunOptions& opt);
// The plan in a few lines for people: one line per distinct (type, kernels) of the layers' matrices
// and one for the output head.
std::vector<std::string> describe_plan(const Plan& plan);

struct DeviceWeights;  // the weights in a GPU's memory (engine/backend_cuda.cpp)
class Backend;

class Engine {
public:
    // Plans every matrix; with opt.device == Cuda uploads the weights (ridge::Error naming the
    // reason when this build or machine has no usable GPU, or the tensor a GPU kernel cannot read).
    // `model` must outlive the Engine. place = false plans without touching a device (a pass on
    // paper: make_cost_backend).
    Engine(const Model& model, const RunOptions& opt = {}, bool place = true);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const Model& model() const { return model_; }
    const Config& config() const { return model_.config; }
    const Plan& plan() const { return plan_; }
    const RunOptions& options() const { return plan_.opt; }
    bool on_gpu() const { return plan_.opt.device == Device::Cuda; }
    bool exact() const { return plan_.opt.exact; }

    // A backend for one Workspace (the per-batch state of a GPU backend lives in it).
    std::unique_ptr<Backend> make_backend() const;

private:
    const Model& model_;
    Plan plan_;
    std::shared_ptr<const DeviceWeights> device_;
};

}  // namespace ridge
