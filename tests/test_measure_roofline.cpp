// Tests for engine/roofline: the log-log mapping by hand (decades evenly spaced, inverses),
// fit_axes (whole decades holding every point and ridge point with a margin), the SVG read back
// with libxml2 (well-formed; the slope, the ceilings, the ridge point, one marker per drawable
// point sitting at axes.x(intensity), axes.y(gflops); ticks; labels escaped), and
// roofline_from_bench on hand-made counters (ops of equal cost merged, the rest apart), and
// roofline_batch_series (one labelled point per batch size).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "measure/roofline.h"
#include "svg_test_util.h"

namespace ridge {
namespace {

using test::parse_xml;
using test::XmlDoc;
using test::XmlElement;

constexpr double kPx = 0.006;  // coordinates are written with two decimals

// ---- LogLogAxes ---------------------------------------------------------------------------------

TEST(RooflineAxes, DefaultAxesByHand) {
    const LogLogAxes a;  // 0.1 .. 1000 on both axes: four decades over 620 x 460 pixels at (90, 60)
    EXPECT_DOUBLE_EQ(a.x(0.1), 90);
    EXPECT_DOUBLE_EQ(a.x(1), 90 + 155);
    EXPECT_DOUBLE_EQ(a.x(10), 90 + 310);
    EXPECT_DOUBLE_EQ(a.x(1000), 710);
    EXPECT_DOUBLE_EQ(a.y(0.1), 520);  // GFLOP/s grows upwards: the bottom edge
    EXPECT_DOUBLE_EQ(a.y(10), 290);
    EXPECT_DOUBLE_EQ(a.y(1000), 60);
    EXPECT_NEAR(a.x(std::sqrt(10.0)), 90 + 155 + 77.5, 1e-9);  // half a decade is half the spacing
}

TEST(RooflineAxes, DecadesAreEvenlySpacedAndInversesHold) {
    LogLogAxes a;
    a.i_min = 1e-3, a.i_max = 1e4, a.g_min = 1e-2, a.g_max = 1e5;
    a.left = 10, a.top = 20, a.width = 700, a.height = 350;
    for (int k = -3; k < 4; k++) EXPECT_NEAR(a.x(std::pow(10.0, k + 1)) - a.x(std::pow(10.0, k)), 100, 1e-9) << k;
    for (int k = -2; k < 5; k++) EXPECT_NEAR(a.y(std::pow(10.0, k)) - a.y(std::pow(10.0, k + 1)), 50, 1e-9) << k;
    EXPECT_DOUBLE_EQ(a.x(1e-3), 10);
    EXPECT_DOUBLE_EQ(a.x(1e4), 710);
    EXPECT_DOUBLE_EQ(a.y(1e-2), 370);
    EXPECT_DOUBLE_EQ(a.y(1e5), 20);
    for (double v : {1e-3, 0.0042, 0.5, 1.0, 3.3, 77.0, 1234.5, 1e4}) {
        EXPECT_NEAR(a.intensity_at(a.x(v)), v, 1e-12 * v) << v;
        EXPECT_NEAR(a.gflops_at(a.y(v)), v, 1e-12 * v) << v;
    }
    for (double p : {10.0, 123.4, 710.0}) EXPECT_NEAR(a.x(a.intensity_at(p)), p, 1e-9);
    for (double p : {20.0, 200.0, 370.0}) EXPECT_NEAR(a.y(a.gflops_at(p)), p, 1e-9);
}

// ---- fit_axes -----------------------------------------------------------------------------------

RooflineRoof roof(double bw, double peak, double kernel = 0) {
    RooflineRoof r;
    r.label = "2 threads";
    r.bandwidth_gbs = bw;
    r.peak_gflops = peak;
    r.kernel_gflops = kernel;
    r.kernel_label = "f32 matmul";
    return r;
}

bool whole_decade(double v) { return std::fabs(std::log10(v) - std::round(std::log10(v))) < 1e-12; }

// (intensity, gflops) lies inside the axes with at least a sixth of a decade to each edge.
void expect_held(const LogLogAxes& a, double i, double g, const std::string& what) {
    const double m = 1.0 / 6.0 - 1e-9;
    EXPECT_GE(std::log10(i) - std::log10(a.i_min), m) << what;
    EXPECT_GE(std::log10(a.i_max) - std::log10(i), m) << what;
    EXPECT_GE(std::log10(g) - std::log10(a.g_min), m) << what;
    EXPECT_GE(std::log10(a.g_max) - std::log10(g), m) << what;
}

TEST(RooflineFitAxes, HandWorkedDecades) {
    RooflinePlot plot;
    plot.roofs.push_back(roof(20, 200));  // ridge point 10 FLOP/byte at 200 GFLOP/s
    plot.series.push_back({"s", "#000000", {{"decode", 0.5, 3}, {"prefill", 150, 40}}});
    const LogLogAxes a = fit_axes(plot);
    // x: 0.5 .. 150 -> log10 -0.30 .. 2.18, with the margin -0.47 .. 2.34 -> 0.1 .. 1000.
    EXPECT_DOUBLE_EQ(a.i_min, 0.1);
    EXPECT_DOUBLE_EQ(a.i_max, 1000);
    // y: 3 .. 200 -> log10 0.48 .. 2.30, with the margin 0.31 .. 2.47 -> 1 .. 1000.
    EXPECT_DOUBLE_EQ(a.g_min, 1);
    EXPECT_DOUBLE_EQ(a.g_max, 1000);
    // A point on a decade gets the margin too: 1000 GFLOP/s needs 10^4 above it.
    plot.series[0].points.push_back({"edge", 1, 1000});
    EXPECT_DOUBLE_EQ(fit_axes(plot).g_max, 1e4);
}

TEST(RooflineFitAxes, AtLeastTwoDecadesAndDefaultsWhenEmpty) {
    RooflinePlot plot;
    const LogLogAxes empty = fit_axes(plot), def;
    EXPECT_EQ(empty.i_min, def.i_min);
    EXPECT_EQ(empty.i_max, def.i_max);
    EXPECT_EQ(empty.g_min, def.g_min);
    EXPECT_EQ(empty.g_max, def.g_max);

    plot.series.push_back({"s", "#000000", {{"one", 5, 5}}});  // log10 0.70: 1 .. 10 plus a decade
    const LogLogAxes a = fit_axes(plot);
    EXPECT_DOUBLE_EQ(a.i_min, 1);
    EXPECT_DOUBLE_EQ(a.i_max, 100);
    EXPECT_DOUBLE_EQ(a.g_min, 1);
    EXPECT_DOUBLE_EQ(a.g_max, 100);
}

TEST(RooflineFitAxes, IgnoresPointsThatCannotBeDrawn) {
    RooflinePlot plot;
    plot.roofs.push_back(roof(20, 200));
    plot.series.push_back({"s", "#000000", {{"a", 2, 30}}});
    const LogLogAxes before = fit_axes(plot);
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    plot.series[0].points.insert(plot.series[0].points.end(),
                                 {{"zero i", 0, 1e9}, {"neg i", -3, 1e-9}, {"zero g", 1e9, 0}, {"neg g", 1e-9, -1},
                                  {"nan", nan, 5}, {"inf", 5, inf}});
    plot.roofs.push_back(roof(0, 1e9));     // no bandwidth: not a roof
    plot.roofs.push_back(roof(inf, 1e-9));  // not finite: not a roof
    const LogLogAxes after = fit_axes(plot);
    EXPECT_EQ(after.i_min, before.i_min);
    EXPECT_EQ(after.i_max, before.i_max);
    EXPECT_EQ(after.g_min, before.g_min);
    EXPECT_EQ(after.g_max, before.g_max);
}

TEST(RooflineFitAxes, HoldsEveryPointRidgeAndKernelCeilingOnRandomPlots) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> exp10(-4, 6);
    for (int trial = 0; trial < 200; trial++) {
        RooflinePlot plot;
        const int n_roofs = int(rng() % 3), n_points = int(rng() % 12);
        for (int r = 0; r < n_roofs; r++)
            plot.roofs.push_back(roof(std::pow(10, exp10(rng)), std::pow(10, exp10(rng)),
                                      rng() % 2 ? std::pow(10, exp10(rng)) : 0.0));
        plot.series.push_back({"s", "#000000", {}});
        for (int p = 0; p < n_points; p++)
            plot.series[0].points.push_back({"p", std::pow(10, exp10(rng)), std::pow(10, exp10(rng))});
        const LogLogAxes a = fit_axes(plot);
        EXPECT_TRUE(whole_decade(a.i_min) && whole_decade(a.i_max) && whole_decade(a.g_min) && whole_decade(a.g_max));
        EXPECT_GE(std::log10(a.i_max) - std::log10(a.i_min), 2 - 1e-9);
        EXPECT_GE(std::log10(a.g_max) - std::log10(a.g_min), 2 - 1e-9);
        for (const RooflinePoint& p : plot.series[0].points) expect_held(a, p.intensity, p.gflops, "point");
        for (const RooflineRoof& r : plot.roofs) {
            expect_held(a, r.ridge_point(), r.peak_gflops, "ridge point");
            if (r.kernel_gflops > 0) expect_held(a, r.kernel_gflops / r.bandwidth_gbs, r.kernel_gflops, "kernel");
        }
    }
}

// ---- roofline_svg -------------------------------------------------------------------------------

const std::string kOddLabel = "a<b & \"c\" 'd' >";

RooflinePlot sample_plot() {
    RooflinePlot plot;
    plot.title = "ridge roofline: <test> & \"friends\"";
    plot.roofs.push_back(roof(20, 200, 120));  // ridge point 10 FLOP/byte
    const double nan = std::numeric_limits<double>::quiet_NaN();
    plot.series.push_back({"phases", "#d62728", {{"prefill pp16", 60, 45}, {"decode tg4", 2.5, 12}}});
    plot.series.push_back({"decode ops (tg4)", "#2ca02c",
                           {{"q,o", 400, 30},
                            {"attention", 1.2, 3},
                            {kOddLabel, 5, 5},
                            {"no time", 3, 0},
                            {"no bytes", 0, 7},
                            {"negative", -1, 7},
                            {"nan", nan, 7}}});
    plot.notes.push_back("a note with <markup> & such");
    return plot;
}

// The drawable points of a plot, in order.
std::vector<std::pair<std::string, RooflinePoint>> drawable_points(const RooflinePlot& plot) {
    std::vector<std::pair<std::string, RooflinePoint>> out;
    for (const RooflineSeries& s : plot.series)
        for (const RooflinePoint& p : s.points)
            if (p.drawable()) out.emplace_back(s.name, p);
    return out;
}

TEST(RooflineSvg, IsWellFormedSvgWithTitleAndAxes) {
    const RooflinePlot plot = sample_plot();
    const XmlDoc doc = parse_xml(roofline_svg(plot));
    ASSERT_TRUE(doc.ok) << doc.error;
    const XmlElement& root = doc.elements[0];
    EXPECT_EQ(root.name, "svg");
    EXPECT_EQ(root.ns, "http://www.w3.org/2000/svg");
    EXPECT_GT(root.num("width"), 0);
    EXPECT_GT(root.num("height"), 0);
    ASSERT_FALSE(doc.find("title").empty());
    EXPECT_EQ(doc.find("title")[0]->text, plot.title);  // escaped in the file, itself when read back
    ASSERT_EQ(doc.find("text", "title").size(), 1u);
    EXPECT_EQ(doc.find("text", "title")[0]->text, plot.title);
    EXPECT_EQ(doc.find("rect", "frame").size(), 1u);
    EXPECT_EQ(doc.find("text", "axis-title-x").size(), 1u);
    EXPECT_EQ(doc.find("text", "axis-title-y").size(), 1u);
    ASSERT_EQ(doc.find("text", "note").size(), 1u);
    EXPECT_EQ(doc.find("text", "note")[0]->text, plot.notes[0]);
}

TEST(RooflineSvg, TicksSitOnTheirDecades) {
    const RooflinePlot plot = sample_plot();
    const LogLogAxes a = fit_axes(plot);  // 0.1 .. 1000 x 1 .. 1000 here
    const XmlDoc doc = parse_xml(roofline_svg(plot));
    ASSERT_TRUE(doc.ok) << doc.error;
    const auto tx = doc.find("line", "tick-x"), lx = doc.find("text", "tick-label-x");
    const auto ty = doc.find("line", "tick-y"), ly = doc.find("text", "tick-label-y");
    const std::vector<std::string> want_x = {"0.1", "1", "10", "100", "1000"}, want_y = {"1", "10", "100", "1000"};
    ASSERT_EQ(tx.size(), want_x.size());
    ASSERT_EQ(lx.size(), want_x.size());
    ASSERT_EQ(ty.size(), want_y.size());
    ASSERT_EQ(ly.size(), want_y.size());
    for (size_t k = 0; k < want_x.size(); k++) {
        EXPECT_EQ(lx[k]->text, want_x[k]);
        const double v = std::stod(want_x[k]);
        EXPECT_NEAR(tx[k]->num("x1"), a.x(v), kPx);
        EXPECT_NEAR(tx[k]->num("x2"), a.x(v), kPx);
        EXPECT_NEAR(lx[k]->num("x"), a.x(v), kPx);
    }
    for (size_t k = 0; k < want_y.size(); k++) {
        EXPECT_EQ(ly[k]->text, want_y[k]);
        const double v = std::stod(want_y[k]);
        EXPECT_NEAR(ty[k]->num("y1"), a.y(v), kPx);
        EXPECT_NEAR(ty[k]->num("y2"), a.y(v), kPx);
    }
    // Far decades are written as powers of ten.
    RooflinePlot wide;
    wide.series.push_back({"s", "#000000", {{"tiny", 1e-5, 1e-5}, {"huge", 1e6, 1e6}}});
    const XmlDoc w = parse_xml(roofline_svg(wide));
    ASSERT_TRUE(w.ok) << w.error;
    const auto wl = w.find("text", "tick-label-x");
    ASSERT_FALSE(wl.empty());
    EXPECT_EQ(wl.front()->text, "1e-6");
    EXPECT_EQ(wl.back()->text, "1e7");
    for (const XmlElement* t : wl) EXPECT_TRUE(whole_decade(std::stod(t->text))) << t->text;
}

// The integer kernels' peak (probe) is a second, dotted ceiling, from where the slope reaches it to
// the right edge, with its instruction in the label; the axes take it in.
TEST(RooflineSvg, IntegerCeilingIsDottedAtItsPeak) {
    RooflinePlot plot = sample_plot();
    plot.roofs[0].int_gflops = 400;  // 20 GB/s reaches it at 20 FLOP/byte
    plot.roofs[0].int_label = "vpdpwssd zmm";
    const LogLogAxes a = fit_axes(plot);
    EXPECT_GE(a.g_max, 400);
    const XmlDoc doc = parse_xml(roofline_svg(plot));
    ASSERT_TRUE(doc.ok) << doc.error;
    const auto line = doc.find("line", "int-ceiling");
    ASSERT_EQ(line.size(), 1u);
    EXPECT_NEAR(line[0]->num("x1"), a.x(20), kPx);
    EXPECT_NEAR(line[0]->num("x2"), a.left + a.width, kPx);
    EXPECT_NEAR(line[0]->num("y1"), a.y(400), kPx);
    EXPECT_NEAR(line[0]->num("y2"), a.y(400), kPx);
    EXPECT_TRUE(line[0]->has("stroke-dasharray"));
    ASSERT_EQ(doc.find("text", "int-ceiling-label").size(), 1u);
    EXPECT_NE(doc.find("text", "int-ceiling-label")[0]->text.find("400.0 GFLOP/s int dot peak (vpdpwssd zmm)"),
              std::string::npos);
    // Without one, no such line.
    EXPECT_TRUE(parse_xml(roofline_svg(sample_plot())).find("line", "int-ceiling").empty());
}

TEST(RooflineSvg, RoofSlopeCeilingAndRidgePointWhereTheNumbersSay) {
    const RooflinePlot plot = sample_plot();
    const LogLogAxes a = fit_axes(plot);
    const XmlDoc doc = parse_xml(roofline_svg(plot));
    ASSERT_TRUE(doc.ok) << doc.error;
    const auto roofs = doc.find("g", "roof");
    ASSERT_EQ(roofs.size(), 1u);
    EXPECT_DOUBLE_EQ(roofs[0]->num("data-bandwidth-gbs"), 20);
    EXPECT_DOUBLE_EQ(roofs[0]->num("data-peak-gflops"), 200);
    EXPECT_EQ(roofs[0]->attr("data-label"), "2 threads");

    // The slope: both ends on GFLOP/s = I * 20, entering at the plot's edge, ending at the ridge point.
    const auto slope = doc.find("line", "bandwidth");
    ASSERT_EQ(slope.size(), 1u);
    for (const char* end : {"1", "2"}) {
        const double x = slope[0]->num(std::string("x") + end), y = slope[0]->num(std::string("y") + end);
        EXPECT_NEAR(y, a.y(a.intensity_at(x) * 20), 0.02) << end;
    }
    // 20 GB/s reaches 1 GFLOP/s (the bottom edge) at 0.05 FLOP/byte, left of the axis: starts at the left edge.
    EXPECT_NEAR(slope[0]->num("x1"), a.left, kPx);
    EXPECT_NEAR(slope[0]->num("y1"), a.y(0.1 * 20), kPx);
    EXPECT_NEAR(slope[0]->num("x2"), a.x(10), kPx);
    EXPECT_NEAR(slope[0]->num("y2"), a.y(200), kPx);
    ASSERT_EQ(doc.find("text", "bandwidth-label").size(), 1u);
    EXPECT_NE(doc.find("text", "bandwidth-label")[0]->text.find("20.0 GB/s"), std::string::npos);

    // The compute ceiling: flat at 200 from the ridge point to the right edge.
    const auto peak = doc.find("line", "peak");
    ASSERT_EQ(peak.size(), 1u);
    EXPECT_NEAR(peak[0]->num("x1"), a.x(10), kPx);
    EXPECT_NEAR(peak[0]->num("x2"), a.left + a.width, kPx);
    EXPECT_NEAR(peak[0]->num("y1"), a.y(200), kPx);
    EXPECT_NEAR(peak[0]->num("y2"), a.y(200), kPx);
    EXPECT_NE(doc.find("text", "peak-label")[0]->text.find("200.0 GFLOP/s"), std::string::npos);

    // The kernel's ceiling: dashed at 120, from where the slope reaches it (6 FLOP/byte).
    const auto kernel = doc.find("line", "kernel-ceiling");
    ASSERT_EQ(kernel.size(), 1u);
    EXPECT_NEAR(kernel[0]->num("x1"), a.x(6), kPx);
    EXPECT_NEAR(kernel[0]->num("y1"), a.y(120), kPx);
    EXPECT_NEAR(kernel[0]->num("y2"), a.y(120), kPx);
    EXPECT_TRUE(kernel[0]->has("stroke-dasharray"));

    // The ridge point: an 8 px square centred on (10 FLOP/byte, 200 GFLOP/s), with its label.
    const auto ridge = doc.find("rect", "ridge-point");
    ASSERT_EQ(ridge.size(), 1u);
    EXPECT_DOUBLE_EQ(ridge[0]->num("data-intensity"), 10);
    EXPECT_NEAR(ridge[0]->num("x") + ridge[0]->num("width") / 2, a.x(10), kPx);
    EXPECT_NEAR(ridge[0]->num("y") + ridge[0]->num("height") / 2, a.y(200), kPx);
    ASSERT_EQ(doc.find("text", "ridge-label").size(), 1u);
    EXPECT_NE(doc.find("text", "ridge-label")[0]->text.find("10.00 FLOP/byte"), std::string::npos);
    // Every roof element is inside its roof group.
    for (const char* cls : {"bandwidth", "peak", "kernel-ceiling"})
        EXPECT_EQ(doc.ancestor(*doc.find("line", cls)[0], "g"), roofs[0]) << cls;
}

TEST(RooflineSvg, OneMarkerPerDrawablePointWhereItsNumbersSay) {
    const RooflinePlot plot = sample_plot();
    const LogLogAxes a = fit_axes(plot);
    const XmlDoc doc = parse_xml(roofline_svg(plot));
    ASSERT_TRUE(doc.ok) << doc.error;
    const auto want = drawable_points(plot);
    ASSERT_EQ(want.size(), 5u);  // 2 phases, q,o, attention, the odd label; not the 4 without numbers
    const auto circles = doc.find("circle", "point");
    ASSERT_EQ(circles.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) {
        const XmlElement& c = *circles[i];
        const auto& [series, p] = want[i];
        EXPECT_EQ(c.attr("data-series"), series);
        EXPECT_EQ(c.attr("data-label"), p.label);
        // The data attributes carry the input numbers...
        EXPECT_NEAR(c.num("data-intensity"), p.intensity, 1e-8 * p.intensity);
        EXPECT_NEAR(c.num("data-gflops"), p.gflops, 1e-8 * p.gflops);
        // ...and the marker sits where they say, on the axes fit_axes chose.
        EXPECT_NEAR(c.num("cx"), a.x(c.num("data-intensity")), kPx) << p.label;
        EXPECT_NEAR(c.num("cy"), a.y(c.num("data-gflops")), kPx) << p.label;
        EXPECT_NEAR(c.num("cx"), a.x(p.intensity), kPx) << p.label;
        EXPECT_NEAR(c.num("cy"), a.y(p.gflops), kPx) << p.label;
        // Inside the plot area, and in its series' group.
        EXPECT_GT(c.num("cx"), a.left);
        EXPECT_LT(c.num("cx"), a.left + a.width);
        EXPECT_GT(c.num("cy"), a.top);
        EXPECT_LT(c.num("cy"), a.top + a.height);
        const XmlElement* g = doc.ancestor(c, "g");
        ASSERT_NE(g, nullptr);
        EXPECT_EQ(g->attr("class"), "series");
        EXPECT_EQ(g->attr("data-name"), series);
    }
    // One label per marker, with the point's text, beside it.
    const auto labels = doc.find("text", "point-label");
    ASSERT_EQ(labels.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) {
        EXPECT_EQ(labels[i]->text, want[i].second.label);
        EXPECT_LT(std::fabs(labels[i]->num("y") - circles[i]->num("cy")), 60) << want[i].second.label;
        EXPECT_LT(std::fabs(labels[i]->num("x") - circles[i]->num("cx")), 10 + 6.2 * 20) << want[i].second.label;
    }
    // The points without numbers are nowhere.
    for (const char* gone : {"no time", "no bytes", "negative", "nan"}) {
        for (const XmlElement* c : circles) EXPECT_NE(c->attr("data-label"), gone);
        for (const XmlElement* t : labels) EXPECT_NE(t->text, gone);
    }
    // A legend entry per roof and per series.
    const auto legend = doc.find("g", "legend");
    ASSERT_EQ(legend.size(), 1u);
    EXPECT_EQ(doc.find("circle", "legend-marker").size(), plot.series.size());
    EXPECT_EQ(doc.find("line", "legend-roof").size(), 1u);
}

TEST(RooflineSvg, EscapesMarkupAndReplacesWhatXmlCannotHold) {
    RooflinePlot plot = sample_plot();
    plot.series[1].name = "ops <&> \"quoted\"";
    plot.roofs[0].label = "roof & <co>";
    plot.series[1].points.push_back({std::string("ctl\x01\x1f and bad \xff\xfe utf-8 \xc3\xa9 ok"), 7, 7});
    const std::string svg = roofline_svg(plot);
    EXPECT_EQ(svg.find(kOddLabel), std::string::npos);  // never raw in the file
    EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot; &apos;d&apos; &gt;"), std::string::npos);
    const XmlDoc doc = parse_xml(svg);
    ASSERT_TRUE(doc.ok) << doc.error;
    std::set<std::string> labels, series;
    for (const XmlElement* c : doc.find("circle", "point")) {
        labels.insert(c->attr("data-label"));
        series.insert(c->attr("data-series"));
    }
    EXPECT_TRUE(labels.count(kOddLabel));
    EXPECT_TRUE(labels.count("ctl?? and bad ?? utf-8 \xc3\xa9 ok"));  // é kept, the rest replaced
    EXPECT_TRUE(series.count("ops <&> \"quoted\""));
    EXPECT_EQ(doc.find("g", "roof")[0]->attr("data-label"), "roof & <co>");
    std::set<std::string> texts;
    for (const XmlElement* t : doc.find("text", "point-label")) texts.insert(t->text);
    EXPECT_TRUE(texts.count(kOddLabel));
}

TEST(RooflineSvg, EmptyPlotAndPlotWithoutRoofsAreWellFormed) {
    const XmlDoc empty = parse_xml(roofline_svg(RooflinePlot{}));
    ASSERT_TRUE(empty.ok) << empty.error;
    EXPECT_TRUE(empty.find("circle", "point").empty());
    EXPECT_TRUE(empty.find("g", "roof").empty());
    EXPECT_FALSE(empty.find("line", "tick-x").empty());

    RooflinePlot no_roof = sample_plot();
    no_roof.roofs[0].bandwidth_gbs = 0;  // not measured: nothing drawn for it
    const XmlDoc d = parse_xml(roofline_svg(no_roof));
    ASSERT_TRUE(d.ok) << d.error;
    EXPECT_TRUE(d.find("g", "roof").empty());
    EXPECT_TRUE(d.find("rect", "ridge-point").empty());
    EXPECT_EQ(d.find("circle", "point").size(), 5u);
}

TEST(RooflineSvg, TwoRoofsEachWithItsRidgePoint) {
    RooflinePlot plot = sample_plot();
    plot.roofs.push_back(roof(40, 800));  // 20 FLOP/byte
    plot.roofs.back().label = "8 threads";
    const LogLogAxes a = fit_axes(plot);
    const XmlDoc doc = parse_xml(roofline_svg(plot));
    ASSERT_TRUE(doc.ok) << doc.error;
    const auto ridges = doc.find("rect", "ridge-point");
    ASSERT_EQ(ridges.size(), 2u);
    EXPECT_DOUBLE_EQ(ridges[1]->num("data-intensity"), 20);
    EXPECT_NEAR(ridges[1]->num("x") + 4, a.x(20), kPx);
    EXPECT_NEAR(ridges[1]->num("y") + 4, a.y(800), kPx);
    EXPECT_EQ(doc.find("line", "bandwidth").size(), 2u);
    EXPECT_EQ(doc.find("line", "peak").size(), 2u);
}

// ---- roofline_from_bench ------------------------------------------------------------------------

Cost cost(double flops, double weights, double act_read, double act_written, double kv_read = 0) {
    Cost c;
    c.flops = flops;
    c.weight_bytes = weights;
    c.act_read = act_read;
    c.act_written = act_written;
    c.kv_read = kv_read;
    return c;
}

// The counters of `rows` tokens through 2 layers of a tiny f32 model: n_embd 64, k/v 32 wide,
// n_ff 128, n_vocab 512. Op op's kernel calls take (1 + index of op) * 1e-6 * rows seconds each.
Counters counters_for(int rows) {
    const double m = rows, d = 64, kv = 32, ff = 128, vocab = 512;
    Counters c;
    auto t = [&](Op op) { return (1.0 + double(op)) * 1e-6 * m; };
    for (int l = 0; l < 2; l++) {
        c.add(l, Op::Norm, cost(3 * m * d, 4 * d, 4 * m * d, 4 * m * d), t(Op::Norm));
        c.add(l, Op::Q, cost(2 * m * d * d, 4 * d * d, 4 * m * d, 4 * m * d), t(Op::Q));
        c.add(l, Op::K, cost(2 * m * d * kv, 4 * d * kv, 4 * m * d, 4 * m * kv), t(Op::K));
        c.add(l, Op::V, cost(2 * m * d * kv, 4 * d * kv, 4 * m * d, 4 * m * kv), t(Op::V));
        c.add(l, Op::AttnScores, cost(2 * m * 100, 0, 4 * m * d, 4 * m * 10, 4 * 100), t(Op::AttnScores));
        c.add(l, Op::AttnMix, cost(2 * m * 100, 0, 4 * m * 10, 4 * m * d, 4 * 100), t(Op::AttnMix));
        c.add(l, Op::O, cost(2 * m * d * d, 4 * d * d, 4 * m * d, 4 * m * d), t(Op::O));
        c.add(l, Op::Gate, cost(2 * m * d * ff, 4 * d * ff, 4 * m * d, 4 * m * ff), t(Op::Gate));
        c.add(l, Op::Up, cost(2 * m * d * ff, 4 * d * ff, 4 * m * d, 4 * m * ff), t(Op::Up));
        c.add(l, Op::Down, cost(2 * m * d * ff, 4 * d * ff, 4 * m * ff, 4 * m * d), t(Op::Down));
    }
    c.add(-1, Op::OutputHead, cost(2 * d * vocab, 4 * d * vocab, 4 * d, 4 * vocab), t(Op::OutputHead));
    return c;
}

BenchTest test_of(Phase phase, int tokens, double tokens_per_second, const Ceilings& ceil) {
    BenchTest t;
    t.phase = phase;
    t.name = (phase == Phase::Prefill ? "pp" : "tg") + std::to_string(tokens);
    t.n_tokens = tokens;
    t.counters = counters_for(phase == Phase::Prefill ? tokens : 1);
    t.counted_tokens = phase == Phase::Prefill ? tokens : 1;
    t.samples = {tokens_per_second};
    t.tokens_per_second = spread_of(t.samples);
    t.report = phase_report(t.counters.total().cost, t.counted_tokens, tokens_per_second, &ceil);
    return t;
}

TEST(RooflineFromBench, PhasesAndMergedOpKindsByHand) {
    Ceilings ceil;
    ceil.threads = 2;
    ceil.bandwidth_gbs = 25;
    ceil.fma_gflops = 300;
    ceil.matmul_gflops = 190;
    ceil.matmul_name = "v2_eigen f32 2048x2048x2048";
    ceil.int_dot_gflops = 520;
    ceil.int_dot_name = "vpdpwssd zmm";
    ceil.cpu = "Test CPU";
    BenchResult bench;
    bench.threads = 2;
    bench.tests.push_back(test_of(Phase::Prefill, 16, 900, ceil));
    bench.tests.push_back(test_of(Phase::Decode, 4, 300, ceil));

    const RooflinePlot plot = roofline_from_bench(bench, ceil, "title");
    EXPECT_EQ(plot.title, "title");
    ASSERT_EQ(plot.roofs.size(), 1u);
    EXPECT_EQ(plot.roofs[0].label, "2 threads");
    EXPECT_DOUBLE_EQ(plot.roofs[0].bandwidth_gbs, 25);
    EXPECT_DOUBLE_EQ(plot.roofs[0].peak_gflops, 300);
    EXPECT_DOUBLE_EQ(plot.roofs[0].kernel_gflops, 190);
    EXPECT_DOUBLE_EQ(plot.roofs[0].int_gflops, 520);
    EXPECT_EQ(plot.roofs[0].int_label, "vpdpwssd zmm");
    EXPECT_DOUBLE_EQ(plot.roofs[0].ridge_point(), 12);

    // Series 0: the phases at their median speed, as bench reports them.
    ASSERT_EQ(plot.series.size(), 3u);
    ASSERT_EQ(plot.series[0].points.size(), 2u);
    EXPECT_EQ(plot.series[0].points[0].label, "prefill pp16");
    EXPECT_EQ(plot.series[0].points[1].label, "decode tg4");
    for (size_t i = 0; i < 2; i++) {
        EXPECT_DOUBLE_EQ(plot.series[0].points[i].intensity, bench.tests[i].report.intensity);
        EXPECT_DOUBLE_EQ(plot.series[0].points[i].gflops, bench.tests[i].report.achieved_gflops);
    }
    // Decode by hand: FLOPs/token = sum of the ops, GFLOP/s = that * 300 tokens/s.
    const double d = 64, kv = 32, ff = 128, vocab = 512;
    const double layer_flops = 3 * d + 2 * (2 * d * d) + 2 * (2 * d * kv) + 4 * 100 + 3 * (2 * d * ff);
    const double layer_bytes = 4 * d + 2 * 4 * d * d + 2 * 4 * d * kv + 2 * 400 + 3 * 4 * d * ff;
    const double tok_flops = 2 * layer_flops + 2 * d * vocab, tok_bytes = 2 * layer_bytes + 4 * d * vocab;
    EXPECT_NEAR(plot.series[0].points[1].intensity, tok_flops / tok_bytes, 1e-12);
    EXPECT_NEAR(plot.series[0].points[1].gflops, tok_flops * 300 / 1e9, 1e-12);

    // Series 1 and 2: op kinds; equal costs per call merged (q with o, k with v, gate with up),
    // down apart from gate and up (its input and output are the other way round), norm not drawn.
    const std::vector<std::string> want = {"q,o", "k,v", "gate,up", "down", "output_head", "attention"};
    for (size_t s = 1; s <= 2; s++) {
        const BenchTest& t = bench.tests[s - 1];
        const RooflineSeries& ser = plot.series[s];
        EXPECT_EQ(ser.name, std::string(phase_name(t.phase)) + " ops (" + t.name + ")");
        ASSERT_EQ(ser.points.size(), want.size());
        for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(ser.points[i].label, want[i]);
        const double m = t.phase == Phase::Prefill ? 16 : 1;
        auto secs = [&](Op op) { return 2 * (1.0 + double(op)) * 1e-6 * m; };  // two layers
        // q,o: 2 m d^2 FLOPs over 4 d^2 bytes each; time the two ops' sum.
        EXPECT_NEAR(ser.points[0].intensity, m / 2, 1e-12);
        EXPECT_NEAR(ser.points[0].gflops, 4 * (2 * m * d * d) / (secs(Op::Q) + secs(Op::O)) / 1e9, 1e-9);
        EXPECT_NEAR(ser.points[1].gflops, 4 * (2 * m * d * kv) / (secs(Op::K) + secs(Op::V)) / 1e9, 1e-9);
        EXPECT_NEAR(ser.points[2].gflops, 4 * (2 * m * d * ff) / (secs(Op::Gate) + secs(Op::Up)) / 1e9, 1e-9);
        EXPECT_NEAR(ser.points[3].gflops, 2 * (2 * m * d * ff) / secs(Op::Down) / 1e9, 1e-9);
        EXPECT_NEAR(ser.points[4].intensity, 0.5, 1e-12);  // one f32 matvec: 2 FLOPs per 4 bytes
        // attention: scores and mix as one point, 4 m 100 FLOPs over 800 bytes of KV per layer.
        EXPECT_NEAR(ser.points[5].intensity, 4 * m * 100 / 800, 1e-12);
        EXPECT_NEAR(ser.points[5].gflops, 2 * (4 * m * 100) / (secs(Op::AttnScores) + secs(Op::AttnMix)) / 1e9, 1e-9);
    }
    // And the whole plot draws.
    const XmlDoc doc = parse_xml(roofline_svg(plot));
    ASSERT_TRUE(doc.ok) << doc.error;
    EXPECT_EQ(doc.find("circle", "point").size(), 2u + 2 * want.size());
}

// ---- roofline_batch_series ----------------------------------------------------------------------

TEST(RooflineBatchSeries, OnePointPerBatchSizeAtItsIntensityAndSpeed) {
    BatchBenchResult batch;
    for (int B : {1, 4, 16, 64}) {
        BatchPoint p;
        p.batch = B;
        p.report.intensity = 0.9 * B;         // I ~ B
        p.report.achieved_gflops = 7.0 * B;  // up the slope
        batch.points.push_back(p);
    }
    BatchPoint idle;  // nothing measured: left out of the drawing, not out of the series
    idle.batch = 128;
    batch.points.push_back(idle);
    const RooflineSeries ser = roofline_batch_series(batch);
    EXPECT_EQ(ser.name, "batched decode (B sequences)");
    ASSERT_EQ(ser.points.size(), 5u);
    const char* labels[] = {"B=1", "B=4", "B=16", "B=64", "B=128"};
    for (size_t i = 0; i < 5; i++) {
        EXPECT_EQ(ser.points[i].label, labels[i]);
        EXPECT_DOUBLE_EQ(ser.points[i].intensity, batch.points[i].report.intensity);
        EXPECT_DOUBLE_EQ(ser.points[i].gflops, batch.points[i].report.achieved_gflops);
    }
    EXPECT_FALSE(ser.points[4].drawable());

    // Drawn under a roof: one labelled marker per measured B, left to right as B grows.
    RooflinePlot plot;
    plot.roofs.push_back(roof(20, 200));
    plot.series.push_back(ser);
    const XmlDoc doc = parse_xml(roofline_svg(plot));
    ASSERT_TRUE(doc.ok) << doc.error;
    const auto circles = doc.find("circle", "point");
    const auto texts = doc.find("text", "point-label");
    ASSERT_EQ(circles.size(), 4u);
    ASSERT_EQ(texts.size(), 4u);
    for (size_t i = 0; i < 4; i++) {
        EXPECT_EQ(circles[i]->attr("data-label"), labels[i]);
        EXPECT_EQ(circles[i]->attr("data-series"), "batched decode (B sequences)");
        EXPECT_EQ(texts[i]->text, labels[i]);
        if (i > 0) {
            EXPECT_GT(circles[i]->num("cx"), circles[i - 1]->num("cx"));
            EXPECT_LT(circles[i]->num("cy"), circles[i - 1]->num("cy"));  // higher GFLOP/s is up
        }
    }
}

}  // namespace
}  // namespace ridge
