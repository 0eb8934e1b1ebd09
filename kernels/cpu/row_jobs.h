// Splitting the output rows of one or several matmuls among the threads of one OpenMP region.
// A decode step's matmuls are one row of X against each weight: the threads split the weight's
// rows. q, k and v read the same X, as do gate and up; run as one job list they share one region
// (one team start and one join instead of three), and the small ones (SmolLM2's k and v, 192 rows
// each) are split with the rest instead of alone.
#pragma once
#include <cstdint>
#include <functional>

namespace ridge::cpu {

// One matmul's rows as a job: run(j0, j1) computes its output rows [j0, j1) on the calling thread,
// for any j0 that is a multiple of `align` (the kernel's rows per pass; j1 is one too, or rows).
// row_cost (> 0) weighs its rows against other jobs' (bytes per weight row), so that shares balance.
struct RowJob {
    int64_t rows = 0;
    int64_t align = 1;
    double row_cost = 1.0;
    std::function<void(int64_t j0, int64_t j1)> run;
};

// Runs every job's rows. With `parallel`, one OpenMP region whose threads take contiguous shares
// of equal cost of the jobs' rows laid end to end, each thread calling run() once for each job
// its share overlaps; otherwise run(0, rows) for each job in turn. Which thread computes a row
// does not change its result (every kernel computes each row by the same operations).
void run_row_jobs(const RowJob* jobs, int n_jobs, bool parallel);

}  // namespace ridge::cpu
