// A CUDA graph behind one function: Graph::run(stream, key, record) captures the work that
// `record` queues on the stream into a graph the first time, and whenever the key changes, and
// replays the instantiated graph otherwise: one launch for a whole decode step instead of hundreds,
// with no launch gaps between the kernels. The key must change whenever anything baked into the
// captured launches does (grid sizes, buffer addresses, scalar arguments); inputs that change
// every step live in device buffers the captured kernels read, refreshed before run().
// Plain C++ header; graph.cu holds the capture.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cuda/runtime.h"

namespace ridge::cuda {

class Graph {
public:
    Graph() = default;
    ~Graph();
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    // Queues record's work on s: replayed from the graph when key matches the captured one, else
    // captured anew (record runs once, under capture: it must not synchronize or allocate).
    // The key is compared in full (no hash): a replay happens only for the very same values.
    void run(const Stream& s, const std::vector<uint64_t>& key, const std::function<void()>& record);
    int64_t captures() const { return captures_; }  // how many times a graph was captured
    int64_t replays() const { return replays_; }    // how many times one was replayed

private:
    void reset();
    void* graph_ = nullptr;  // cudaGraph_t
    void* exec_ = nullptr;   // cudaGraphExec_t
    std::vector<uint64_t> key_;
    bool have_ = false;
    int64_t captures_ = 0, replays_ = 0;
};

}  // namespace ridge::cuda
