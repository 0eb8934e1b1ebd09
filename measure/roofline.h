// Roofline plot: a machine's ceilings and measured points on log-log axes (x: arithmetic
// intensity in FLOP/byte, y: GFLOP/s), written by ridge itself as one self-contained SVG.
// A plot is plain data: any number of roofs (one per machine or thread count) and point series
// (phases, ops; later batch sizes or another machine's run), so new uses add data, not drawing code.
#pragma once
#include <string>
#include <vector>

#include "measure/batch_bench.h"
#include "measure/bench.h"
#include "measure/ceilings.h"

namespace ridge {

// One machine's roof: the bandwidth slope GFLOP/s = I * bandwidth up to the ridge point, then the
// flat compute ceiling. An optional second compute line marks what a real kernel reached.
struct RooflineRoof {
    std::string label;           // e.g. "2 threads"
    double bandwidth_gbs = 0;    // the slope
    double peak_gflops = 0;      // the flat ceiling (the FMA peak)
    double kernel_gflops = 0;    // optional dashed ceiling (the engine's best matmul); 0: none
    std::string kernel_label;    // what kernel_gflops is
    double int_gflops = 0;       // optional dotted ceiling: the integer kernels' peak (probe); 0: none
    std::string int_label;       // its instruction ("vpdpwssd zmm")
    std::string color = "#222222";
    double ridge_point() const { return peak_gflops / bandwidth_gbs; }  // I* in FLOP/byte
    bool drawable() const;  // bandwidth and peak positive and finite
};

struct RooflinePoint {
    std::string label;       // "decode", "q,o", "attention", ...
    double intensity = 0;    // FLOP/byte (> 0 to be drawn)
    double gflops = 0;       // achieved GFLOP/s (> 0 to be drawn)
    bool drawable() const;   // intensity and gflops positive and finite
};

struct RooflineSeries {
    std::string name;        // the legend entry, e.g. "decode ops"
    std::string color;       // SVG colour of its markers
    std::vector<RooflinePoint> points;
};

struct RooflinePlot {
    std::string title;
    std::vector<RooflineRoof> roofs;
    std::vector<RooflineSeries> series;
    std::vector<std::string> notes;  // lines of small print under the plot
};

// The data-to-pixel mapping of the plot area: log10 of each axis mapped linearly onto
// [left, left + width] (intensity, growing right) and [top + height, top] (GFLOP/s, growing up).
struct LogLogAxes {
    double i_min = 0.1, i_max = 1000;  // intensity range (powers of ten)
    double g_min = 0.1, g_max = 1000;  // GFLOP/s range (powers of ten)
    double left = 90, top = 60, width = 620, height = 460;  // the plot area in SVG pixels

    double x(double intensity) const;
    double y(double gflops) const;
    double intensity_at(double px) const;  // x() inverted
    double gflops_at(double py) const;     // y() inverted
};

// Whole decades that hold every drawable point, every roof's ridge point and ceilings, with at
// least a sixth of a decade of margin and at least two decades per axis.
LogLogAxes fit_axes(const RooflinePlot& plot);

// The SVG document (the axes come from fit_axes). Each point is a <circle class="point"> with
// data-series, data-label, data-intensity and data-gflops attributes and a text label beside it.
// Points and roofs that are not drawable are left out. Text is escaped: markup characters as
// entities, control characters and bytes that are not UTF-8 as '?', so the file is always XML.
std::string roofline_svg(const RooflinePlot& plot);

// The roof of one machine's ceilings: "2 threads" or "GPU <name>", the bandwidth slope, the peak
// and the engine's best matmul as the dashed kernel ceiling.
RooflineRoof roofline_roof(const Ceilings& ceilings, const std::string& color);

// A plot of one bench run under `ceilings`: series "phases" (prefill, decode at their median
// speed) and one series of per-op points per test (the matmuls and attention: the ops that stream
// weights or the KV cache). Op kinds with the same cost per call (k and v, gate and up, ...) are
// merged into one point ("k,v"); attention's scores and mix are one kernel and one point.
RooflinePlot roofline_from_bench(const BenchResult& bench, const Ceilings& ceilings, const std::string& title);

// Batched decode as one series, "batched decode (B sequences)": a point per B, labelled "B=4", at
// its intensity and achieved GFLOP/s, so the decode point walks up the bandwidth slope as B grows.
RooflineSeries roofline_batch_series(const BatchBenchResult& batch);

}  // namespace ridge
