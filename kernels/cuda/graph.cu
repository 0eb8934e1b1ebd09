// Graph (graph.h): stream capture, instantiation and replay, every call checked.
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/graph.h"

namespace ridge::cuda {

Graph::~Graph() { reset(); }

void Graph::reset() {
    if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
    exec_ = graph_ = nullptr;
    have_ = false;
}

void Graph::run(const Stream& s, const std::vector<uint64_t>& key, const std::function<void()>& record) {
    cudaStream_t st = stream_of(s);
    if (!have_ || key != key_) {
        reset();
        // Relaxed: the host code around the launches (argument checks, cudaFuncSetAttribute) may
        // call the runtime while the stream is being captured.
        RIDGE_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
        try {
            record();
        } catch (...) {
            cudaGraph_t broken = nullptr;
            cudaStreamEndCapture(st, &broken);  // leave the stream usable
            if (broken) cudaGraphDestroy(broken);
            cudaGetLastError();
            throw;
        }
        cudaGraph_t g = nullptr;
        RIDGE_CUDA_CHECK(cudaStreamEndCapture(st, &g));
        graph_ = g;
        cudaGraphExec_t e = nullptr;
        RIDGE_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
        exec_ = e;
        key_ = key;
        have_ = true;
        captures_++;
    } else {
        replays_++;
    }
    RIDGE_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), st));
}

}  // namespace ridge::cuda
