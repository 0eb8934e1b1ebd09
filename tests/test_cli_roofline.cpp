// `ridge roofline` as a user runs it, under ceilings the test writes itself ($RIDGE_PROBE_FILE, so
// no probe runs): the SVG it writes parses as XML (libxml2), holds the prefill and decode points
// and a point per op kind for each, and every marker, the slope, the ceiling and the ridge point
// sit where their numbers say on axes read back from the file's own tick marks; --batch adds one
// labelled point per batch size. Bad input: one "ridge: ..." line and a non-zero exit, and no file written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "svg_test_util.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf");

namespace {

using cli_test::read_file;
using cli_test::RunResult;
using cli_test::scratch;
using ridge::test::parse_xml;
using ridge::test::XmlDoc;
using ridge::test::XmlElement;

const std::string kGguf = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

// The ceilings every run here uses: 7.5 GB/s and 120 GFLOP/s, a ridge point at 16 FLOP/byte.
constexpr double kBandwidth = 7.5, kPeak = 120, kMatmul = 80, kRidgePoint = 16;

// Runs ridge under those ceilings.
RunResult ridge(const std::vector<std::string>& args) {
    static const std::string probe = cli_test::write_probe(kBandwidth, kPeak, /*threads=*/2, kMatmul);
    return cli_test::ridge(args, {{"RIDGE_PROBE_FILE", probe}});
}

// One "ridge: ..." line on stderr, nothing on stdout, a non-zero exit.
void expect_one_line_error(const RunResult& r, const std::string& fragment) {
    EXPECT_NE(r.rc, 0);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("ridge: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

// log10 of a value -> pixel, read off the file's own decade ticks (not the engine's LogLogAxes):
// the first and last tick with their labels fix the line.
struct AxisFromTicks {
    double p0 = 0, p1 = 0, k0 = 0, k1 = 0;
    double at(double v) const { return p0 + (std::log10(v) - k0) / (k1 - k0) * (p1 - p0); }
};

AxisFromTicks axis_from_ticks(const XmlDoc& doc, char axis) {
    const std::string a(1, axis);
    const auto ticks = doc.find("line", "tick-" + a), labels = doc.find("text", "tick-label-" + a);
    AxisFromTicks f;
    EXPECT_GE(ticks.size(), 3u);  // at least two decades
    EXPECT_EQ(ticks.size(), labels.size());
    if (ticks.size() < 2 || ticks.size() != labels.size()) return f;
    const std::string coord = a + "1";
    f.p0 = ticks.front()->num(coord), f.p1 = ticks.back()->num(coord);
    f.k0 = std::log10(std::stod(labels.front()->text)), f.k1 = std::log10(std::stod(labels.back()->text));
    for (size_t i = 0; i < ticks.size(); i++)  // every tick on the same line, a decade apart
        EXPECT_NEAR(ticks[i]->num(coord), f.at(std::stod(labels[i]->text)), 0.02) << labels[i]->text;
    EXPECT_NEAR(f.k1 - f.k0, double(ticks.size() - 1), 1e-9);
    return f;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
    return out;
}

// Checks one written SVG: `prefill` and `decode` are the test names ("pp16", "tg4"); `batch` the
// labels of the batched decode points (--batch), in order of B.
void check_svg(const std::string& svg, const std::string& prefill, const std::string& decode,
               const std::vector<std::string>& batch = {}) {
    const XmlDoc doc = parse_xml(svg);
    ASSERT_TRUE(doc.ok) << doc.error;
    EXPECT_EQ(doc.elements[0].name, "svg");
    EXPECT_EQ(doc.elements[0].ns, "http://www.w3.org/2000/svg");
    const AxisFromTicks X = axis_from_ticks(doc, 'x'), Y = axis_from_ticks(doc, 'y');
    constexpr double tol = 0.03;  // two decimals in every coordinate, ticks included

    // The roof is the probe file's: the slope at 7.5 GB/s up to the ridge point, the ceiling at 120.
    const auto roofs = doc.find("g", "roof");
    ASSERT_EQ(roofs.size(), 1u);
    EXPECT_DOUBLE_EQ(roofs[0]->num("data-bandwidth-gbs"), kBandwidth);
    EXPECT_DOUBLE_EQ(roofs[0]->num("data-peak-gflops"), kPeak);
    EXPECT_EQ(roofs[0]->attr("data-label"), "2 threads");
    const auto ridge_pt = doc.find("rect", "ridge-point");
    ASSERT_EQ(ridge_pt.size(), 1u);
    EXPECT_DOUBLE_EQ(ridge_pt[0]->num("data-intensity"), kRidgePoint);
    EXPECT_NEAR(ridge_pt[0]->num("x") + ridge_pt[0]->num("width") / 2, X.at(kRidgePoint), tol);
    EXPECT_NEAR(ridge_pt[0]->num("y") + ridge_pt[0]->num("height") / 2, Y.at(kPeak), tol);
    const auto slope = doc.find("line", "bandwidth");
    ASSERT_EQ(slope.size(), 1u);
    EXPECT_NEAR(slope[0]->num("x2"), X.at(kRidgePoint), tol);  // the slope ends at the ridge point
    EXPECT_NEAR(slope[0]->num("y2"), Y.at(kPeak), tol);
    // Its start is on GFLOP/s = I * 7.5 too: one decade right is one decade up.
    const double i1 = std::pow(10.0, X.k0 + (slope[0]->num("x1") - X.p0) / (X.p1 - X.p0) * (X.k1 - X.k0));
    EXPECT_NEAR(slope[0]->num("y1"), Y.at(i1 * kBandwidth), tol);
    const auto peak = doc.find("line", "peak");
    ASSERT_EQ(peak.size(), 1u);
    EXPECT_NEAR(peak[0]->num("y1"), Y.at(kPeak), tol);
    EXPECT_NEAR(peak[0]->num("y2"), Y.at(kPeak), tol);
    EXPECT_NEAR(peak[0]->num("x1"), X.at(kRidgePoint), tol);
    const auto kernel = doc.find("line", "kernel-ceiling");
    ASSERT_EQ(kernel.size(), 1u);
    EXPECT_NEAR(kernel[0]->num("y1"), Y.at(kMatmul), tol);
    EXPECT_NEAR(kernel[0]->num("x1"), X.at(kMatmul / kBandwidth), tol);

    // The points: every marker where its numbers say, with a label beside it.
    const auto circles = doc.find("circle", "point");
    const auto labels = doc.find("text", "point-label");
    ASSERT_EQ(labels.size(), circles.size());
    std::set<std::string> phases, prefill_ops, decode_ops;
    std::vector<std::string> batch_labels;
    std::vector<double> batch_i;
    double prefill_i = 0, decode_i = 0;
    for (size_t i = 0; i < circles.size(); i++) {
        const XmlElement& c = *circles[i];
        const double in = c.num("data-intensity"), g = c.num("data-gflops");
        ASSERT_TRUE(in > 0 && g > 0) << c.attr("data-label");
        EXPECT_NEAR(c.num("cx"), X.at(in), tol) << c.attr("data-label");
        EXPECT_NEAR(c.num("cy"), Y.at(g), tol) << c.attr("data-label");
        EXPECT_EQ(labels[i]->text, c.attr("data-label"));
        const std::string series = c.attr("data-series"), label = c.attr("data-label");
        if (series == "phases (median tokens/s)") {
            phases.insert(label);
            if (label == "prefill " + prefill) prefill_i = in;
            if (label == "decode " + decode) decode_i = in;
        } else if (series == "prefill ops (" + prefill + ")") {
            for (const std::string& op : split(label, ',')) EXPECT_TRUE(prefill_ops.insert(op).second) << op;
        } else if (series == "decode ops (" + decode + ")") {
            for (const std::string& op : split(label, ',')) EXPECT_TRUE(decode_ops.insert(op).second) << op;
        } else if (series == "batched decode (B sequences)") {
            batch_labels.push_back(label);
            batch_i.push_back(in);
        } else {
            ADD_FAILURE() << "unexpected series " << series;
        }
    }
    EXPECT_EQ(phases, (std::set<std::string>{"prefill " + prefill, "decode " + decode}));
    const std::set<std::string> ops = {"q", "k", "v", "o", "gate", "up", "down", "output_head", "attention"};
    EXPECT_EQ(prefill_ops, ops);
    EXPECT_EQ(decode_ops, ops);
    // A prompt reuses each weight for every token: prefill sits right of decode.
    EXPECT_GT(prefill_i, 2 * decode_i);
    // One batched decode point per B, walking right (up the slope) as B grows.
    EXPECT_EQ(batch_labels, batch);
    for (size_t i = 1; i < batch_i.size(); i++) EXPECT_GT(batch_i[i], batch_i[i - 1]) << batch_labels[i];
    if (!batch.empty()) {
        const auto notes = doc.find("text", "note");
        EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const XmlElement* e) {
            return e->text.find("Batched decode") != std::string::npos;
        }));
    }
}

TEST(CliRoofline, Stories260kWritesTheMeasuredRoofline) {
    const std::string svg = scratch("stories.svg");
    const RunResult r = ridge({"roofline", "-m", kGguf, "-p", "16", "-n", "4", "-r", "1", "-t", "2", "-o", svg});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err.find("measuring"), std::string::npos) << r.err;  // the probe file was used
    EXPECT_NE(r.out.find("wrote " + svg), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("7.50 GB/s, 120.0 GFLOP/s peak, ridge point 16.00 FLOP/byte"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("prefill pp16"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("decode tg4"), std::string::npos) << r.out;
    const std::string text = read_file(svg);
    check_svg(text, "pp16", "tg4");

    // stories260K's weights are f32: a decode matvec does 2 FLOPs per 4-byte weight, 0.5 FLOP/byte.
    const XmlDoc doc = parse_xml(text);
    int matvecs = 0;
    for (const XmlElement* c : doc.find("circle", "point")) {
        if (c->attr("data-series") != "decode ops (tg4)" || c->attr("data-label") == "attention") continue;
        EXPECT_NEAR(c->num("data-intensity"), 0.5, 1e-6) << c->attr("data-label");
        matvecs++;
    }
    EXPECT_GE(matvecs, 4);
    std::filesystem::remove(svg);
}

TEST(CliRoofline, SyntheticSmolLM2AndAnExistingFileIsReplaced) {
    const std::string svg = scratch("synthetic.svg");
    std::ofstream(svg) << "old contents";
    const RunResult r =
        ridge({"roofline", "--synthetic", "smollm2-135m", "-p", "8", "-n", "2", "-r", "1", "-t", "2", "--output", svg});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err.find("measuring"), std::string::npos) << r.err;
    const std::string text = read_file(svg);
    EXPECT_EQ(text.find("old contents"), std::string::npos);
    check_svg(text, "pp8", "tg2");
    EXPECT_NE(text.find("synthetic smollm2-135m"), std::string::npos);  // the title names the model
    // Q4_0 weights: 18 bytes per 32, so a decode matvec sits at 2 * 32 / 18 = 3.56 FLOP/byte.
    const XmlDoc doc = parse_xml(text);
    int matvecs = 0;
    for (const XmlElement* c : doc.find("circle", "point")) {
        if (c->attr("data-series") != "decode ops (tg2)" || c->attr("data-label") == "attention") continue;
        EXPECT_NEAR(c->num("data-intensity"), 64.0 / 18.0, 1e-6) << c->attr("data-label");
        matvecs++;
    }
    EXPECT_GE(matvecs, 4);
    std::filesystem::remove(svg);
}

TEST(CliRoofline, BatchDrawsOneLabelledPointPerB) {
    const std::string svg = scratch("batch.svg");
    const RunResult r = ridge(
        {"roofline", "-m", kGguf, "-p", "8", "-n", "2", "-r", "1", "-t", "2", "--batch", "1,4,16", "-o", svg});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("batched decode: B=1 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(", B=16 "), std::string::npos) << r.out;
    const std::string text = read_file(svg);
    check_svg(text, "pp8", "tg2", {"B=1", "B=4", "B=16"});
    // stories260K's f32 weights: a step of B rows does about 2 FLOPs per 4-byte weight per row,
    // so the B=1 point sits at the decode point's intensity, about 0.5 FLOP/byte.
    const XmlDoc doc = parse_xml(text);
    for (const XmlElement* c : doc.find("circle", "point")) {
        if (c->attr("data-label") != "B=1") continue;
        EXPECT_NEAR(c->num("data-intensity"), 0.5, 0.05);
    }
    // -B is --batch; -b is the prompt rows per pass here (--ubatch).
    const RunResult s = ridge({"roofline", "-m", kGguf, "-p", "8", "-n", "1", "-r", "1", "-b", "4", "-B", "2,3", "-o", svg});
    ASSERT_EQ(s.rc, 0) << s.err;
    check_svg(read_file(svg), "pp8", "tg1", {"B=2", "B=3"});
    std::filesystem::remove(svg);
}

TEST(CliRoofline, OverlayDrawsTheOtherMachinesRoofAndItsRun) {
    // The other machine: a GPU probe as `ridge probe --device cuda` saves it, and a bench run's JSON.
    const std::string gpu_probe = scratch("probe-cuda.json");
    std::ofstream(gpu_probe) << R"J({"device": "cuda", "threads": 132, "bandwidth_gbs": 4000.0, "fma_gflops": 60000.0,
        "matmul_gflops": 300000.0, "matmul_name": "v4_mma (test)", "reference_gflops": 700000.0,
        "reference_name": "cuBLAS (test)", "cpu": "Test GPU", "measured_at": "2026-01-02T03:04:05Z"})J";
    const std::string run = scratch("gpu-bench.json");
    std::ofstream(run) << R"J({"tests": [{"name": "pp512", "phase": "prefill", "intensity": 400.0, "achieved_gflops": 90000.0},
        {"name": "tg128", "phase": "decode", "intensity": 3.2, "achieved_gflops": 9000.0}]})J";
    const std::string svg = scratch("overlay.svg");
    const RunResult r = ridge({"roofline", "-m", kGguf, "-p", "16", "-n", "4", "-r", "1", "-t", "2", "-o", svg,
                               "--overlay-probe", gpu_probe, "--overlay-bench", run});
    ASSERT_EQ(r.rc, 0) << r.err;
    const XmlDoc doc = parse_xml(read_file(svg));
    ASSERT_TRUE(doc.ok) << doc.error;
    const auto roofs = doc.find("g", "roof");
    ASSERT_EQ(roofs.size(), 2u);
    EXPECT_EQ(roofs[0]->attr("data-label"), "2 threads");  // this machine's, from the probe file
    EXPECT_EQ(roofs[1]->attr("data-label"), "GPU Test GPU");
    EXPECT_DOUBLE_EQ(roofs[1]->num("data-bandwidth-gbs"), 4000.0);
    EXPECT_DOUBLE_EQ(roofs[1]->num("data-peak-gflops"), 700000.0);  // the best measured: cuBLAS
    std::set<std::string> overlay;
    for (const XmlElement* c : doc.find("circle", "point"))
        if (c->attr("data-series") == "phases on GPU Test GPU") {
            overlay.insert(c->attr("data-label"));
            if (c->attr("data-label") == "decode tg128") {
                EXPECT_DOUBLE_EQ(c->num("data-intensity"), 3.2);
            }
        }
    EXPECT_EQ(overlay, (std::set<std::string>{"prefill pp512", "decode tg128"}));
    // --overlay-bench alone has no roof to sit under; a file that is not a bench run is named.
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "-o", svg, "--overlay-bench", run}), "--overlay-probe");
    expect_one_line_error(
        ridge({"roofline", "-m", kGguf, "-o", svg, "--overlay-probe", gpu_probe, "--overlay-bench", gpu_probe}),
        "not a `ridge bench --json` run");
    std::filesystem::remove(svg);
}

TEST(CliRoofline, BadInputIsOneLineAndWritesNothing) {
    const std::string svg = scratch("bad.svg");
    std::filesystem::remove(svg);
    // -o is required.
    expect_one_line_error(ridge({"roofline", "-m", kGguf}), "--output");
    // A path that cannot be written: before any measuring.
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "-o", "/nonexistent-ridge-dir/r.svg"}),
                          "/nonexistent-ridge-dir/r.svg: cannot write");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "-o", ::testing::TempDir()}), "a directory");
    // Bad test sizes.
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "-p", "-3", "-o", svg}), "-p/--n-prompt -3");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "-p", "lots", "-o", svg}), "n-prompt");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "-p", "0", "-n", "0", "-o", svg}), "no test");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "-r", "0", "-o", svg}), "-r/--repetitions 0");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "-p", "100000", "-o", svg}), "context");
    // Bad batch sizes: before any measuring.
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "--batch", "0", "-o", svg}), "batch size 0 must be >= 1");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "--batch", "1,,4", "-o", svg}), "an empty entry");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "--batch", "1,y", "-o", svg}), "'y' is not a whole number");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "--batch", "", "-o", svg}), "no batch sizes given");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "--batch", "4,4", "-o", svg}), "listed twice");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "--batch", "1,4", "-n", "0", "-o", svg}), "-n 0 must be >= 1");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "--ubatch", "0", "-o", svg}), "-b/--ubatch 0");
    // No model, two models, a missing model.
    expect_one_line_error(ridge({"roofline", "-o", svg}), "no model");
    expect_one_line_error(ridge({"roofline", "-m", kGguf, "--synthetic", "smollm2-135m", "-o", svg}), "synthetic");
    expect_one_line_error(ridge({"roofline", "-m", scratch("missing.gguf"), "-o", svg}), "missing.gguf");
    EXPECT_FALSE(std::filesystem::exists(svg));
    // A failed run leaves an existing file as it was.
    std::ofstream(svg) << "keep me";
    expect_one_line_error(ridge({"roofline", "-m", scratch("missing.gguf"), "-o", svg}), "missing.gguf");
    EXPECT_EQ(read_file(svg), "keep me");
    std::filesystem::remove(svg);
}

}  // namespace
