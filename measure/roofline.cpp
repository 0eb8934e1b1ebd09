// The roofline plot (see roofline.h): axes fitted to whole decades, the roofs drawn as clipped
// line segments in log-log space, one marker and label per point (labels nudged apart), a legend.
#include "measure/roofline.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <string>

#include "weights/error.h"

namespace ridge {

namespace {
bool positive_finite(double v) { return std::isfinite(v) && v > 0; }
}  // namespace

bool RooflinePoint::drawable() const { return positive_finite(intensity) && positive_finite(gflops); }
bool RooflineRoof::drawable() const { return positive_finite(bandwidth_gbs) && positive_finite(peak_gflops); }

// ---- axes -----------------------------------------------------------------------------------

double LogLogAxes::x(double intensity) const {
    return left + (std::log10(intensity) - std::log10(i_min)) / (std::log10(i_max) - std::log10(i_min)) * width;
}
double LogLogAxes::y(double gflops) const {
    return top + height - (std::log10(gflops) - std::log10(g_min)) / (std::log10(g_max) - std::log10(g_min)) * height;
}
double LogLogAxes::intensity_at(double px) const {
    return std::pow(10.0, std::log10(i_min) + (px - left) / width * (std::log10(i_max) - std::log10(i_min)));
}
double LogLogAxes::gflops_at(double py) const {
    return std::pow(10.0, std::log10(g_min) + (top + height - py) / height * (std::log10(g_max) - std::log10(g_min)));
}

namespace {

// [10^lo, 10^hi]: whole decades around [min, max] with a margin, at least two decades wide.
void fit_decades(double min, double max, double& out_min, double& out_max) {
    const double margin = 1.0 / 6.0;
    double lo = std::floor(std::log10(min) - margin), hi = std::ceil(std::log10(max) + margin);
    while (hi - lo < 2) {
        hi += 1;
        if (hi - lo < 2) lo -= 1;
    }
    out_min = std::pow(10.0, lo);
    out_max = std::pow(10.0, hi);
}

}  // namespace

LogLogAxes fit_axes(const RooflinePlot& plot) {
    double x_lo = INFINITY, x_hi = 0, y_lo = INFINITY, y_hi = 0;
    auto take = [&](double i, double g) {
        x_lo = std::min(x_lo, i), x_hi = std::max(x_hi, i);
        y_lo = std::min(y_lo, g), y_hi = std::max(y_hi, g);
    };
    for (const RooflineRoof& r : plot.roofs) {
        if (!r.drawable()) continue;
        take(r.ridge_point(), r.peak_gflops);
        if (positive_finite(r.kernel_gflops)) take(r.kernel_gflops / r.bandwidth_gbs, r.kernel_gflops);
        if (positive_finite(r.int_gflops)) take(r.int_gflops / r.bandwidth_gbs, r.int_gflops);
    }
    for (const RooflineSeries& s : plot.series)
        for (const RooflinePoint& p : s.points)
            if (p.drawable()) take(p.intensity, p.gflops);
    LogLogAxes a;
    if (x_hi == 0) return a;  // nothing to draw: the default decades
    fit_decades(x_lo, x_hi, a.i_min, a.i_max);
    fit_decades(y_lo, y_hi, a.g_min, a.g_max);
    return a;
}

// ---- SVG ------------------------------------------------------------------------------------

namespace {

// Length of the valid UTF-8 sequence at s[i] (1 to 4 bytes), or 0 when the bytes there are not one
// (stray continuation bytes, overlong forms, surrogates, past U+10FFFF).
size_t utf8_length(const std::string& s, size_t i) {
    const unsigned char c = s[i];
    if (c < 0x80) return 1;
    const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    uint32_t cp = c & (0x7F >> n);
    for (size_t k = 1; k < n; k++) {
        const unsigned char cc = s[i + k];
        if ((cc & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (cc & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

// Text safe inside an XML element or a double-quoted attribute: the five markup characters as
// entities; tabs and line breaks as spaces; other control characters (not allowed in XML 1.0)
// and bytes that are not UTF-8 as '?'.
std::string esc(const std::string& s) {
    std::string o;
    for (size_t i = 0; i < s.size();) {
        const char ch = s[i];
        const size_t n = utf8_length(s, i);
        if (n > 1) {
            o.append(s, i, n);
            i += n;
            continue;
        }
        i += 1;
        switch (ch) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            case '\'': o += "&apos;"; break;
            case '\t': case '\n': case '\r': o += ' '; break;
            default: o += (n == 0 || (unsigned char)ch < 0x20 || ch == 0x7F) ? '?' : ch;
        }
    }
    return o;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}
std::string px(double v) { return fmt("%.2f", v); }
std::string num(double v) { return fmt("%.9g", v); }  // exact enough to read back

// "0.01", "1", "1000", or "1e6" for decades far from 1.
std::string decade_label(int k) {
    if (k < -3 || k > 4) return "1e" + std::to_string(k);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", k < 0 ? -k : 0, std::pow(10.0, k));
    return buf;
}

std::string line(double x1, double y1, double x2, double y2, const std::string& cls, const std::string& style) {
    return "<line class=\"" + cls + "\" x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" +
           px(y2) + "\" " + style + "/>\n";
}

std::string text(double x, double y, const std::string& s, const std::string& cls, const std::string& extra = "") {
    return "<text class=\"" + cls + "\" x=\"" + px(x) + "\" y=\"" + px(y) + "\"" + (extra.empty() ? "" : " " + extra) +
           ">" + esc(s) + "</text>\n";
}

struct Box {
    double x0, y0, x1, y1;
    bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
    bool inside(const Box& o) const { return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1; }
};
constexpr double kCharWidth = 6.2;  // average width of an 11 px sans-serif character
constexpr double kLabelHeight = 12;

// The box of a one-line label whose text starts at (x, baseline y).
Box label_box(double x, double y, const std::string& label) {
    return Box{x, y - kLabelHeight + 3, x + kCharWidth * double(label.size()), y + 3};
}

// Boxes along a label rotated by `angle` degrees about its middle (lx, ly): one per few characters,
// so that point labels may sit close to the slope without crossing its text.
void take_rotated_label(double lx, double ly, double angle, const std::string& label, std::vector<Box>& taken) {
    const double w = kCharWidth * double(label.size()), rad = angle * std::numbers::pi / 180.0;
    const int pieces = std::max(1, int(label.size() / 3));
    for (int k = 0; k < pieces; k++) {
        const double d = -w / 2 + (k + 0.5) * w / pieces;  // distance along the text from its middle
        const double cx = lx + d * std::cos(rad), cy = ly - 4 + d * std::sin(rad);
        taken.push_back(Box{cx - w / pieces / 2, cy - kLabelHeight / 2, cx + w / pieces / 2, cy + kLabelHeight / 2});
    }
}

// The first place beside the marker at (cx, cy), right of it and then left of it, nearest rows
// first, where the label stays inside `area` and overlaps nothing taken; returns the text anchor
// position and records its box.
void place_label(double cx, double cy, const std::string& label, const Box& area, std::vector<Box>& taken,
                 double& tx, double& ty, bool& anchor_end) {
    const double w = kCharWidth * double(label.size());
    const double offsets[] = {0, -13, 13, -26, 26, -39, 39, -52, 52};
    for (bool need_inside : {true, false}) {
        for (double dy : offsets) {
            for (int side = 0; side < 2; side++) {
                const double x = side == 0 ? cx + 7 : cx - 7 - w;
                const Box b = label_box(x, cy + dy + 4, label);
                if (need_inside && !b.inside(area)) continue;
                if (std::none_of(taken.begin(), taken.end(), [&](const Box& o) { return o.overlaps(b); })) {
                    taken.push_back(b);
                    tx = side == 0 ? x : x + w;
                    ty = cy + dy + 4;
                    anchor_end = side == 1;
                    return;
                }
            }
        }
    }
    tx = cx + 7, ty = cy + 4, anchor_end = false;  // crowded: overlap rather than wander off
    taken.push_back(label_box(tx, ty, label));
}

}  // namespace

std::string roofline_svg(const RooflinePlot& plot) {
    const LogLogAxes a = fit_axes(plot);
    const double W = 1000, H = 640;
    const double right = a.left + a.width, bottom = a.top + a.height;
    std::string s;
    s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(W) + "\" height=\"" + px(H) + "\" viewBox=\"0 0 " +
         px(W) + " " + px(H) + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\">\n";
    s += "<title>" + esc(plot.title) + "</title>\n";
    s += "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" + px(W) + "\" height=\"" + px(H) + "\" fill=\"white\"/>\n";
    s += text(a.left, 30, plot.title, "title", "font-size=\"15\" font-weight=\"bold\"");

    // Axes: frame, decade ticks with labels and grid, minor grid at 2..9 times each decade.
    s += "<g class=\"axes\">\n";
    const int xk0 = int(std::lround(std::log10(a.i_min))), xk1 = int(std::lround(std::log10(a.i_max)));
    const int yk0 = int(std::lround(std::log10(a.g_min))), yk1 = int(std::lround(std::log10(a.g_max)));
    const std::string grid = "stroke=\"#e4e4e4\" stroke-width=\"1\"", minor = "stroke=\"#f2f2f2\" stroke-width=\"1\"";
    for (int k = xk0; k <= xk1; k++) {
        const double x = a.x(std::pow(10.0, k));
        s += line(x, a.top, x, bottom, "grid-x", grid);
        s += line(x, bottom, x, bottom + 6, "tick-x", "stroke=\"black\"");
        s += text(x, bottom + 20, decade_label(k), "tick-label-x", "text-anchor=\"middle\"");
        for (int j = 2; j <= 9 && k < xk1; j++) {
            const double xm = a.x(j * std::pow(10.0, k));
            s += line(xm, a.top, xm, bottom, "minor-grid-x", minor);
        }
    }
    for (int k = yk0; k <= yk1; k++) {
        const double y = a.y(std::pow(10.0, k));
        s += line(a.left, y, right, y, "grid-y", grid);
        s += line(a.left - 6, y, a.left, y, "tick-y", "stroke=\"black\"");
        s += text(a.left - 10, y + 4, decade_label(k), "tick-label-y", "text-anchor=\"end\"");
        for (int j = 2; j <= 9 && k < yk1; j++) {
            const double ym = a.y(j * std::pow(10.0, k));
            s += line(a.left, ym, right, ym, "minor-grid-y", minor);
        }
    }
    s += "<rect class=\"frame\" x=\"" + px(a.left) + "\" y=\"" + px(a.top) + "\" width=\"" + px(a.width) +
         "\" height=\"" + px(a.height) + "\" fill=\"none\" stroke=\"black\"/>\n";
    s += text(a.left + a.width / 2, bottom + 42, "arithmetic intensity (FLOP/byte)", "axis-title-x",
              "text-anchor=\"middle\" font-size=\"13\"");
    s += text(28, a.top + a.height / 2, "GFLOP/s", "axis-title-y",
              "text-anchor=\"middle\" font-size=\"13\" transform=\"rotate(-90 28 " + px(a.top + a.height / 2) + ")\"");
    s += "</g>\n";

    // Roofs: the slope I * bandwidth (clipped to the axes) up to the ridge point, then the peak.
    std::vector<Box> taken;
    for (const RooflineRoof& r : plot.roofs) {
        if (!r.drawable()) continue;
        const double ridge = r.ridge_point();
        const std::string stroke = "stroke=\"" + esc(r.color) + "\" stroke-width=\"2\"";
        s += "<g class=\"roof\" data-label=\"" + esc(r.label) + "\" data-bandwidth-gbs=\"" + num(r.bandwidth_gbs) +
             "\" data-peak-gflops=\"" + num(r.peak_gflops) + "\">\n";
        const double i0 = std::max(a.i_min, a.g_min / r.bandwidth_gbs), i1 = std::min(ridge, a.i_max);
        if (i0 < i1) {
            s += line(a.x(i0), a.y(i0 * r.bandwidth_gbs), a.x(i1), a.y(i1 * r.bandwidth_gbs), "bandwidth", stroke);
            const double im = std::sqrt(i0 * i1);  // label halfway along the slope (in log space)
            const double angle = std::atan2(a.y(i1 * r.bandwidth_gbs) - a.y(i0 * r.bandwidth_gbs), a.x(i1) - a.x(i0)) *
                                 180.0 / std::numbers::pi;
            const double lx = a.x(im), ly = a.y(im * r.bandwidth_gbs) - 6;
            const std::string lab = r.label + ": " + fmt("%.1f", r.bandwidth_gbs) + " GB/s";
            s += text(lx, ly, lab, "bandwidth-label",
                      "text-anchor=\"middle\" fill=\"" + esc(r.color) + "\" transform=\"rotate(" + fmt("%.2f", angle) +
                          " " + px(lx) + " " + px(ly) + ")\"");
            take_rotated_label(lx, ly, angle, lab, taken);
        }
        if (r.peak_gflops <= a.g_max) {
            s += line(a.x(std::max(ridge, a.i_min)), a.y(r.peak_gflops), right, a.y(r.peak_gflops), "peak", stroke);
            const std::string lab = fmt("%.1f", r.peak_gflops) + " GFLOP/s peak (FMA)";
            s += text(right - 4, a.y(r.peak_gflops) - 5, lab, "peak-label",
                      "text-anchor=\"end\" fill=\"" + esc(r.color) + "\"");
            taken.push_back(label_box(right - 4 - kCharWidth * double(lab.size()), a.y(r.peak_gflops) - 5, lab));
        }
        if (positive_finite(r.kernel_gflops) && r.kernel_gflops <= a.g_max) {
            const double ik = std::max(r.kernel_gflops / r.bandwidth_gbs, a.i_min);
            s += line(a.x(ik), a.y(r.kernel_gflops), right, a.y(r.kernel_gflops), "kernel-ceiling",
                      "stroke=\"" + esc(r.color) + "\" stroke-width=\"1.2\" stroke-dasharray=\"6 4\"");
            const std::string lab = fmt("%.1f", r.kernel_gflops) + " GFLOP/s " + r.kernel_label;
            s += text(right - 4, a.y(r.kernel_gflops) + 13, lab, "kernel-ceiling-label",
                      "text-anchor=\"end\" fill=\"" + esc(r.color) + "\"");
            taken.push_back(label_box(right - 4 - kCharWidth * double(lab.size()), a.y(r.kernel_gflops) + 13, lab));
        }
        if (positive_finite(r.int_gflops) && r.int_gflops <= a.g_max) {  // the quantized matmuls' own roof
            const double ii = std::max(r.int_gflops / r.bandwidth_gbs, a.i_min);
            s += line(a.x(ii), a.y(r.int_gflops), right, a.y(r.int_gflops), "int-ceiling",
                      "stroke=\"" + esc(r.color) + "\" stroke-width=\"1.2\" stroke-dasharray=\"1 3\"");
            const std::string lab = fmt("%.1f", r.int_gflops) + " GFLOP/s int dot peak (" + r.int_label + ")";
            s += text(right - 4, a.y(r.int_gflops) - 5, lab, "int-ceiling-label",
                      "text-anchor=\"end\" fill=\"" + esc(r.color) + "\"");
            taken.push_back(label_box(right - 4 - kCharWidth * double(lab.size()), a.y(r.int_gflops) - 5, lab));
        }
        if (ridge >= a.i_min && ridge <= a.i_max) {
            const double rx = a.x(ridge), ry = a.y(r.peak_gflops);
            s += "<rect class=\"ridge-point\" x=\"" + px(rx - 4) + "\" y=\"" + px(ry - 4) +
                 "\" width=\"8\" height=\"8\" fill=\"white\" stroke=\"" + esc(r.color) + "\" stroke-width=\"2\" " +
                 "data-intensity=\"" + num(ridge) + "\"/>\n";
            s += line(rx, ry, rx, bottom, "ridge-drop", "stroke=\"" + esc(r.color) + "\" stroke-dasharray=\"2 3\"");
            const std::string lab = "ridge point " + fmt("%.2f", ridge) + " FLOP/byte";
            s += text(rx + 6, ry + 16, lab, "ridge-label", "fill=\"" + esc(r.color) + "\"");
            taken.push_back(label_box(rx + 6, ry + 16, lab));
        }
        s += "</g>\n";
    }

    // Point series: a marker per point with its numbers as data attributes, and a label beside it
    // (placed clear of every marker, the roof labels and the labels before it).
    const double r_marker = 4.5;
    for (const RooflineSeries& ser : plot.series)
        for (const RooflinePoint& p : ser.points)
            if (p.drawable())
                taken.push_back(Box{a.x(p.intensity) - r_marker, a.y(p.gflops) - r_marker, a.x(p.intensity) + r_marker,
                                    a.y(p.gflops) + r_marker});
    const Box area{a.left, a.top, right, bottom};
    for (const RooflineSeries& ser : plot.series) {
        s += "<g class=\"series\" data-name=\"" + esc(ser.name) + "\">\n";
        for (const RooflinePoint& p : ser.points) {
            if (!p.drawable()) continue;
            const double cx = a.x(p.intensity), cy = a.y(p.gflops);
            s += "<circle class=\"point\" cx=\"" + px(cx) + "\" cy=\"" + px(cy) + "\" r=\"" + px(r_marker) + "\" fill=\"" + esc(ser.color) +
                 "\" stroke=\"white\" stroke-width=\"1\" data-series=\"" + esc(ser.name) + "\" data-label=\"" +
                 esc(p.label) + "\" data-intensity=\"" + num(p.intensity) + "\" data-gflops=\"" + num(p.gflops) +
                 "\"><title>" + esc(ser.name + ": " + p.label + ", " + fmt("%.3g", p.intensity) + " FLOP/byte, " +
                                    fmt("%.3g", p.gflops) + " GFLOP/s") +
                 "</title></circle>\n";
            double tx = 0, ty = 0;
            bool end = false;
            place_label(cx, cy, p.label, area, taken, tx, ty, end);
            s += text(tx, ty, p.label, "point-label",
                      std::string("fill=\"") + esc(ser.color) + "\"" + (end ? " text-anchor=\"end\"" : ""));
        }
        s += "</g>\n";
    }

    // Legend: one entry per roof and per series, right of the plot.
    s += "<g class=\"legend\">\n";
    double ly = a.top + 10;
    const double lx = right + 24;
    for (const RooflineRoof& r : plot.roofs) {
        if (!r.drawable()) continue;
        s += line(lx, ly - 4, lx + 18, ly - 4, "legend-roof", "stroke=\"" + esc(r.color) + "\" stroke-width=\"2\"");
        s += text(lx + 24, ly, "roof: " + r.label, "legend-label");
        ly += 16;
        s += text(lx + 24, ly, fmt("%.1f", r.bandwidth_gbs) + " GB/s, " + fmt("%.1f", r.peak_gflops) + " GFLOP/s",
                  "legend-label");
        ly += 22;
    }
    for (const RooflineSeries& ser : plot.series) {
        s += "<circle class=\"legend-marker\" cx=\"" + px(lx + 9) + "\" cy=\"" + px(ly - 4) + "\" r=\"4.5\" fill=\"" +
             esc(ser.color) + "\"/>\n";
        s += text(lx + 24, ly, ser.name, "legend-label");
        ly += 18;
    }
    s += "</g>\n";

    double ny = bottom + 64;
    for (const std::string& n : plot.notes) {
        s += text(a.left, ny, n, "note", "font-size=\"10\" fill=\"#555555\"");
        ny += 14;
    }
    s += "</svg>\n";
    return s;
}

// ---- from a bench run -------------------------------------------------------------------------

namespace {

// Op kinds drawn per test: the ones that stream weights (the matmuls) or the KV cache (attention).
struct OpGroup {
    std::string label;
    std::vector<Op> ops;
};

// Same FLOPs and bytes in every category: the activations read and written tell (n x k) from
// (k x n), so down (n_ff -> n_embd) stays apart from gate and up (n_embd -> n_ff).
bool same_cost(const Cost& a, const Cost& b) {
    auto eq = [](double x, double y) { return std::fabs(x - y) <= 1e-9 * std::max(std::fabs(x), std::fabs(y)); };
    return eq(a.flops, b.flops) && eq(a.weight_bytes, b.weight_bytes) && eq(a.kv_read, b.kv_read) &&
           eq(a.kv_written, b.kv_written) && eq(a.act_read, b.act_read) && eq(a.act_written, b.act_written);
}

RooflinePoint point_of(const std::string& label, const OpRecord& r) {
    RooflinePoint p;
    p.label = label;
    p.intensity = r.cost.intensity();
    p.gflops = r.seconds > 0 ? r.cost.flops / r.seconds / 1e9 : 0.0;
    return p;
}

}  // namespace

RooflineRoof roofline_roof(const Ceilings& c, const std::string& color) {
    RooflineRoof roof;
    roof.label = c.device == "cuda" ? "GPU " + c.cpu
                                    : std::to_string(c.threads) + (c.threads == 1 ? " thread" : " threads");
    roof.bandwidth_gbs = c.bandwidth_gbs;
    roof.peak_gflops = c.peak_gflops();
    roof.kernel_gflops = c.matmul_gflops;
    roof.kernel_label = c.matmul_name.empty() ? "f32 matmul" : "matmul (" + c.matmul_name + ")";
    roof.int_gflops = c.int_dot_gflops;
    roof.int_label = c.int_dot_name;
    roof.color = color;
    return roof;
}

RooflinePlot roofline_from_bench(const BenchResult& bench, const Ceilings& c, const std::string& title) {
    RooflinePlot plot;
    plot.title = title;
    plot.roofs.push_back(roofline_roof(c, "#222222"));

    RooflineSeries phases{"phases (median tokens/s)", "#d62728", {}};
    const char* op_colors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b"};
    size_t color = 0;
    for (const BenchTest& t : bench.tests) {
        phases.points.push_back(RooflinePoint{std::string(phase_name(t.phase)) + " " + t.name, t.report.intensity,
                                              t.report.achieved_gflops});
        RooflineSeries ops{std::string(phase_name(t.phase)) + " ops (" + t.name + ")",
                           op_colors[color++ % std::size(op_colors)], {}};
        // Op kinds with the same cost per call are one kernel on one shape: one point.
        std::vector<std::pair<std::string, OpRecord>> kinds;
        for (Op op : {Op::Q, Op::K, Op::V, Op::O, Op::Gate, Op::Up, Op::Down, Op::OutputHead}) {
            const OpRecord r = t.counters.op(op);
            if (r.calls == 0) continue;
            Cost per_call = r.cost;
            per_call.scale(1.0 / double(r.calls));
            bool merged = false;
            for (auto& [label, k] : kinds) {
                Cost k_call = k.cost;
                k_call.scale(1.0 / double(k.calls));
                if (same_cost(per_call, k_call)) {
                    label += std::string(",") + op_name(op);
                    k += r;
                    merged = true;
                    break;
                }
            }
            if (!merged) kinds.emplace_back(op_name(op), r);
        }
        OpRecord attention = t.counters.op(Op::AttnScores);
        attention += t.counters.op(Op::AttnMix);
        if (attention.calls > 0) kinds.emplace_back("attention", attention);
        for (const auto& [label, r] : kinds) ops.points.push_back(point_of(label, r));
        plot.series.push_back(ops);
    }
    plot.series.insert(plot.series.begin(), phases);

    plot.notes.push_back("bytes = weights read + KV cache read and written (activations stay in cache); "
                         "FLOPs and bytes from ridge's counters, time measured per kernel call.");
    plot.notes.push_back("Not drawn: norm, rope, swiglu, residual, kv_store, embedding (no weight or KV "
                         "traffic, or no FLOPs). Ceilings: " + (c.cpu.empty() ? std::string("?") : c.cpu) +
                         (c.measured_at.empty() ? "" : ", measured " + c.measured_at) + ".");
    return plot;
}

RooflineSeries roofline_batch_series(const BatchBenchResult& batch) {
    RooflineSeries s{"batched decode (B sequences)", "#ff7f0e", {}};
    for (const BatchPoint& p : batch.points)
        s.points.push_back(RooflinePoint{"B=" + std::to_string(p.batch), p.report.intensity, p.report.achieved_gflops});
    return s;
}

}  // namespace ridge
