// run_row_jobs (see row_jobs.h).
#include "kernels/cpu/row_jobs.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ridge::cpu {

void run_row_jobs(const RowJob* jobs, int n_jobs, bool parallel) {
    if (!parallel) {
        for (int o = 0; o < n_jobs; o++)
            if (jobs[o].rows > 0) jobs[o].run(0, jobs[o].rows);
        return;
    }
    // Job o covers [start[o], start[o] + rows * row_cost) of the cost line; a thread's share is
    // [total * t / T, total * (t + 1) / T). A cut at x falls in job o at row ceil((x - start) /
    // row_cost), rounded up to the job's alignment: neighbouring threads compute the same cut.
    std::vector<double> start(size_t(n_jobs) + 1, 0.0);
    for (int o = 0; o < n_jobs; o++) start[size_t(o) + 1] = start[size_t(o)] + double(jobs[o].rows) * jobs[o].row_cost;
    const double total = start[size_t(n_jobs)];
    auto cut = [&](int o, double x) {
        const RowJob& job = jobs[o];
        const double r = std::ceil((x - start[size_t(o)]) / job.row_cost);
        int64_t j = int64_t(std::clamp(r, 0.0, double(job.rows)));
        j = (j + job.align - 1) / job.align * job.align;
        return std::min(j, job.rows);
    };
#pragma omp parallel
    {
        const int t = omp_get_thread_num(), n_threads = omp_get_num_threads();
        const double a = total * t / n_threads, b = t + 1 == n_threads ? total : total * (t + 1) / n_threads;
        for (int o = 0; o < n_jobs; o++) {
            const int64_t j0 = t == 0 ? 0 : cut(o, a), j1 = t + 1 == n_threads ? jobs[o].rows : cut(o, b);
            if (j0 < j1) jobs[o].run(j0, j1);
        }
    }
}

}  // namespace ridge::cpu
