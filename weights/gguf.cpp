// GGUFFile: parse a GGUF v2/v3 file (header, metadata key/values, tensor infos) from a byte range.
// Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv; n_kv x (string key, u32 type,
// value); n_tensors x (string name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset); padding to
// `general.alignment` (default 32); tensor data. A string is u64 length + bytes (no terminator).
#include "weights/gguf.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "weights/mapped_file.h"

namespace ridge {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;   // "GGUF" read as a little-endian u32
constexpr size_t kDefaultAlignment = 32;
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset
constexpr size_t kMinKVBytes = 8 + 4 + 1;                  // empty key, type, 1-byte value

std::string num(uint64_t v) { return std::to_string(v); }

bool valid_type(uint32_t t) { return t <= uint32_t(GGUFType::FLOAT64); }

// Smallest encoding of one value of type t (used to bound counts before allocating).
size_t min_value_bytes(GGUFType t) {
    switch (t) {
        case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::BOOL: return 1;
        case GGUFType::UINT16: case GGUFType::INT16: return 2;
        case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::FLOAT32: return 4;
        case GGUFType::UINT64: case GGUFType::INT64: case GGUFType::FLOAT64: return 8;
        case GGUFType::STRING: return 8;
        case GGUFType::ARRAY: return 12;
    }
    return 1;
}

bool is_unsigned(GGUFType t) {
    return t == GGUFType::UINT8 || t == GGUFType::UINT16 || t == GGUFType::UINT32 || t == GGUFType::UINT64;
}
bool is_signed(GGUFType t) {
    return t == GGUFType::INT8 || t == GGUFType::INT16 || t == GGUFType::INT32 || t == GGUFType::INT64;
}
bool is_float(GGUFType t) { return t == GGUFType::FLOAT32 || t == GGUFType::FLOAT64; }

// Bounds-checked cursor over the file bytes; every failure names the file and a byte offset.
class Reader {
public:
    Reader(const uint8_t* base, size_t size, const std::string& name) : base_(base), size_(size), name_(name) {}
    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }

    [[noreturn]] void fail(const std::string& what, size_t at) const {
        throw Error(name_ + ": " + what + " at byte offset " + num(at));
    }
    void need(size_t n, const char* what) const {
        if (n > remaining())
            fail(std::string("truncated file: ") + what + " needs " + num(n) + " bytes but only " + num(remaining()) +
                     " remain",
                 pos_);
    }
    template <class T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof v);
        pos_ += sizeof v;
        return v;
    }
    std::string read_string(const char* what) {
        size_t at = pos_;
        uint64_t len = read<uint64_t>(what);
        if (len > remaining())
            fail(std::string(what) + " has length " + num(len) + " but only " + num(remaining()) +
                     " bytes remain (truncated or corrupt file)",
                 at);
        std::string s(reinterpret_cast<const char*>(base_ + pos_), size_t(len));
        pos_ += size_t(len);
        return s;
    }

private:
    const uint8_t* base_;
    size_t size_;
    size_t pos_ = 0;
    const std::string& name_;
};

// Reads one scalar of type t (not ARRAY) into v.
void read_scalar(Reader& r, GGUFType t, GGUFValue& v, const std::string& key) {
    switch (t) {
        case GGUFType::UINT8: v.u = r.read<uint8_t>("u8 value"); break;
        case GGUFType::INT8: v.i = r.read<int8_t>("i8 value"); break;
        case GGUFType::UINT16: v.u = r.read<uint16_t>("u16 value"); break;
        case GGUFType::INT16: v.i = r.read<int16_t>("i16 value"); break;
        case GGUFType::UINT32: v.u = r.read<uint32_t>("u32 value"); break;
        case GGUFType::INT32: v.i = r.read<int32_t>("i32 value"); break;
        case GGUFType::UINT64: v.u = r.read<uint64_t>("u64 value"); break;
        case GGUFType::INT64: v.i = r.read<int64_t>("i64 value"); break;
        case GGUFType::FLOAT32: v.f = r.read<float>("f32 value"); break;
        case GGUFType::FLOAT64: v.f = r.read<double>("f64 value"); break;
        case GGUFType::BOOL: {
            size_t at = r.pos();
            uint8_t b = r.read<uint8_t>("bool value");
            if (b > 1) r.fail("metadata key '" + key + "': bool value " + num(b) + " is neither 0 nor 1", at);
            v.i = b;
            break;
        }
        case GGUFType::STRING: v.s = r.read_string("string value"); break;
        case GGUFType::ARRAY: break;  // handled by the caller
    }
}

GGUFValue read_value(Reader& r, GGUFType t, const std::string& key) {
    GGUFValue v;
    v.type = t;
    if (t != GGUFType::ARRAY) {
        read_scalar(r, t, v, key);
        return v;
    }
    size_t at = r.pos();
    uint32_t et = r.read<uint32_t>("array element type");
    if (!valid_type(et)) r.fail("metadata key '" + key + "': unknown array element type " + num(et), at);
    v.elem_type = GGUFType(et);
    if (v.elem_type == GGUFType::ARRAY) r.fail("metadata key '" + key + "': nested arrays are not supported", at);
    size_t count_at = r.pos();
    uint64_t n = r.read<uint64_t>("array length");
    // Bound the count by what the remaining bytes could hold before allocating anything.
    if (n > r.remaining() / min_value_bytes(v.elem_type))
        r.fail("metadata key '" + key + "': array of " + num(n) + " " + std::string(gguf_type_name(v.elem_type)) +
                   " values cannot fit in the " + num(r.remaining()) + " bytes that remain (truncated or corrupt file)",
               count_at);
    GGUFValue e;
    if (v.elem_type == GGUFType::STRING) {
        v.strings.reserve(size_t(n));
        for (uint64_t k = 0; k < n; k++) v.strings.push_back(r.read_string("array string"));
    } else if (is_float(v.elem_type)) {
        v.floats.reserve(size_t(n));
        for (uint64_t k = 0; k < n; k++) {
            read_scalar(r, v.elem_type, e, key);
            v.floats.push_back(e.f);
        }
    } else {
        v.ints.reserve(size_t(n));
        for (uint64_t k = 0; k < n; k++) {
            read_scalar(r, v.elem_type, e, key);
            v.ints.push_back(is_unsigned(v.elem_type) ? int64_t(e.u) : e.i);
        }
    }
    return v;
}

// Shortest round-trip text ("0.25", "1e-05"), but whole numbers in plain digits ("100000").
std::string fmt_float(double f, GGUFType t) {
    char buf[64];
    if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 1e15) {
        auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::fixed);
        return std::string(buf, res.ptr);
    }
    auto res = t == GGUFType::FLOAT32 ? std::to_chars(buf, buf + sizeof buf, float(f))
                                      : std::to_chars(buf, buf + sizeof buf, f);
    return std::string(buf, res.ptr);
}

std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += char(c);
        }
    }
    return out + "\"";
}

}  // namespace

std::string_view gguf_type_name(GGUFType t) {
    switch (t) {
        case GGUFType::UINT8: return "UINT8";
        case GGUFType::INT8: return "INT8";
        case GGUFType::UINT16: return "UINT16";
        case GGUFType::INT16: return "INT16";
        case GGUFType::UINT32: return "UINT32";
        case GGUFType::INT32: return "INT32";
        case GGUFType::FLOAT32: return "FLOAT32";
        case GGUFType::BOOL: return "BOOL";
        case GGUFType::STRING: return "STRING";
        case GGUFType::ARRAY: return "ARRAY";
        case GGUFType::UINT64: return "UINT64";
        case GGUFType::INT64: return "INT64";
        case GGUFType::FLOAT64: return "FLOAT64";
    }
    return "UNKNOWN";
}

size_t GGUFValue::array_size() const {
    if (type != GGUFType::ARRAY) return 0;
    if (elem_type == GGUFType::STRING) return strings.size();
    if (is_float(elem_type)) return floats.size();
    return ints.size();
}

// ---------------------------------------------------------------------------------------------
// Opening and parsing

std::unique_ptr<GGUFFile> GGUFFile::open(const std::string& path) {
    auto map = MappedFile::open(path);
    std::unique_ptr<GGUFFile> f(new GGUFFile());
    f->path_ = path;
    f->base_ = map->data();
    f->size_ = map->size();
    f->map_ = std::move(map);
    f->parse();
    return f;
}

std::unique_ptr<GGUFFile> GGUFFile::from_memory(const uint8_t* data, size_t size, std::string name) {
    std::unique_ptr<GGUFFile> f(new GGUFFile());
    f->path_ = std::move(name);
    f->base_ = data;
    f->size_ = data ? size : 0;
    f->parse();
    return f;
}

GGUFFile::~GGUFFile() = default;

void GGUFFile::parse() {
    Reader r(base_, size_, path_);
    uint32_t magic = r.read<uint32_t>("magic");
    if (magic != kMagic) {
        char shown[5] = {};
        std::memcpy(shown, &magic, 4);
        for (char& c : shown)
            if (c && (c < 0x20 || c > 0x7e)) c = '?';
        r.fail("not a GGUF file: magic is \"" + std::string(shown, 4) + "\", expected \"GGUF\"", 0);
    }
    version_ = r.read<uint32_t>("version");
    if (version_ == 1) r.fail("GGUF version 1 is not supported (ridge reads versions 2 and 3)", 4);
    if (version_ != 2 && version_ != 3) {
        uint32_t swapped = __builtin_bswap32(version_);
        r.fail("unknown GGUF version " + num(version_) +
                   (swapped == 2 || swapped == 3 ? " (a big-endian file? ridge reads little-endian only)"
                                                 : " (ridge reads versions 2 and 3)"),
               4);
    }
    size_t at = r.pos();
    uint64_t n_tensors = r.read<uint64_t>("tensor count");
    uint64_t n_kv = r.read<uint64_t>("metadata count");
    // Bound the metadata count by the bytes left before reading on.
    if (n_kv > r.remaining() / kMinKVBytes)
        r.fail("metadata count " + num(n_kv) + " cannot fit in the " + num(r.remaining()) +
                   " bytes that remain (truncated or corrupt file)",
               at + 8);

    // Metadata.
    for (uint64_t k = 0; k < n_kv; k++) {
        size_t key_at = r.pos();
        std::string key = r.read_string("metadata key");
        if (kv_.count(key)) r.fail("duplicate metadata key '" + key + "'", key_at);
        size_t type_at = r.pos();
        uint32_t t = r.read<uint32_t>("metadata value type");
        if (!valid_type(t)) r.fail("metadata key '" + key + "' has unknown value type " + num(t), type_at);
        GGUFValue v = read_value(r, GGUFType(t), key);
        kv_.emplace(std::move(key), std::move(v));
    }

    alignment_ = kDefaultAlignment;
    if (const GGUFValue* a = find_value("general.alignment")) {
        uint64_t al = 0;
        if (is_unsigned(a->type)) al = a->u;
        else if (is_signed(a->type) && a->i > 0) al = uint64_t(a->i);
        else
            throw Error(path_ + ": metadata key 'general.alignment' has type " +
                        std::string(gguf_type_name(a->type)) + ", expected an unsigned integer");
        // The GGUF spec asks for a multiple of 8; ggml for a power of two. ridge wants both (so
        // that every tensor starts 8-byte aligned), and a sane upper bound.
        if (al < 8 || (al & (al - 1)) != 0 || al > (uint64_t(1) << 30))
            throw Error(path_ + ": general.alignment " + num(al) + " is not a power of two in [8, 2^30]");
        alignment_ = size_t(al);
    }

    // Tensor infos (the count is bounded here, after the metadata, so that a file cut inside
    // the metadata is reported as such rather than as an impossible tensor count).
    if (n_tensors > r.remaining() / kMinTensorInfoBytes)
        r.fail("tensor count " + num(n_tensors) + " (read at byte offset " + num(at) + ") needs at least " +
                   (n_tensors > (UINT64_MAX / kMinTensorInfoBytes) ? std::string("2^64")
                                                                   : num(n_tensors * kMinTensorInfoBytes)) +
                   " bytes of tensor infos but only " + num(r.remaining()) + " bytes remain (truncated or corrupt file)",
               r.pos());
    struct Info {
        size_t info_at;
        uint64_t offset;  // relative to the data section
    };
    std::vector<Info> infos;
    infos.reserve(size_t(n_tensors));
    tensors_.reserve(size_t(n_tensors));
    std::set<std::string, std::less<>> names;
    for (uint64_t k = 0; k < n_tensors; k++) {
        size_t info_at = r.pos();
        TensorView t;
        t.name = r.read_string("tensor name");
        const std::string tn = "tensor '" + t.name + "'";
        if (names.count(t.name)) r.fail("duplicate tensor name '" + t.name + "'", info_at);
        size_t dims_at = r.pos();
        uint32_t n_dims = r.read<uint32_t>("tensor dimension count");
        if (n_dims == 0 || n_dims > 4)
            r.fail(tn + " has " + num(n_dims) + " dimensions (expected 1 to 4)", dims_at);
        int64_t n_el = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            size_t dim_at = r.pos();
            uint64_t ne = r.read<uint64_t>("tensor dimension");
            if (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max()))
                r.fail(tn + " dimension " + num(d) + " is " + num(ne) + " (must be positive)", dim_at);
            if (__builtin_mul_overflow(n_el, int64_t(ne), &n_el))
                r.fail(tn + " element count overflows (dimension " + num(d) + " is " + num(ne) + ")", dim_at);
            t.shape.push_back(int64_t(ne));
        }
        size_t type_at = r.pos();
        uint32_t ty = r.read<uint32_t>("tensor type");
        std::optional<DType> dt = dtype_from_u32(ty);
        if (!dt) r.fail(tn + " has unknown or unsupported type " + num(ty), type_at);
        t.type = *dt;
        int64_t be = block_elems(t.type);
        if (t.shape[0] % be != 0)
            r.fail(tn + " row length " + num(uint64_t(t.shape[0])) + " is not a multiple of the " +
                       std::string(dtype_name(t.type)) + " block size " + num(uint64_t(be)),
                   dims_at);
        // bytes = blocks per row * block bytes * rows, each step checked for overflow
        uint64_t nbytes = uint64_t(t.shape[0] / be);
        if (__builtin_mul_overflow(nbytes, uint64_t(block_bytes(t.type)), &nbytes))
            r.fail(tn + " byte size overflows", dims_at);
        for (size_t d = 1; d < t.shape.size(); d++)
            if (__builtin_mul_overflow(nbytes, uint64_t(t.shape[d]), &nbytes))
                r.fail(tn + " byte size overflows", dims_at);
        t.nbytes = size_t(nbytes);
        size_t off_at = r.pos();
        uint64_t off = r.read<uint64_t>("tensor data offset");
        if (off % alignment_ != 0)
            r.fail(tn + " data offset " + num(off) + " is not a multiple of the alignment " + num(alignment_), off_at);
        names.insert(t.name);
        infos.push_back({info_at, off});
        tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment.
    size_t end_of_infos = r.pos();
    size_t pad = (alignment_ - end_of_infos % alignment_) % alignment_;
    data_offset_ = end_of_infos + pad;
    if (tensors_.empty()) {
        data_offset_ = std::min(data_offset_, size_);  // vocab-only files may end without padding
        return;
    }
    if (data_offset_ > size_)
        throw Error(path_ + ": tensor data section would start at byte offset " + num(data_offset_) +
                    ", past the end of the file (size " + num(size_) + ")");
    const uint64_t avail = size_ - data_offset_;
    for (size_t k = 0; k < tensors_.size(); k++) {
        TensorView& t = tensors_[k];
        uint64_t off = infos[k].offset;
        if (off > avail || t.nbytes > avail - off) {
            uint64_t abs_off;
            std::string where = __builtin_add_overflow(uint64_t(data_offset_), off, &abs_off)
                                    ? "data section + " + num(off)
                                    : num(abs_off);
            throw Error(path_ + ": tensor '" + t.name + "' data [offset " + where + ", " + num(t.nbytes) +
                        " bytes] runs past the end of the file (size " + num(size_) + ")");
        }
        t.data = base_ + data_offset_ + off;
    }
    // No two tensors may share bytes.
    std::vector<size_t> order(tensors_.size());
    for (size_t k = 0; k < order.size(); k++) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return infos[a].offset < infos[b].offset; });
    for (size_t k = 1; k < order.size(); k++) {
        const size_t a = order[k - 1], b = order[k];
        if (infos[a].offset + tensors_[a].nbytes > infos[b].offset)
            throw Error(path_ + ": tensor '" + tensors_[b].name + "' data [offset " +
                        num(data_offset_ + infos[b].offset) + ", " + num(tensors_[b].nbytes) +
                        " bytes] overlaps tensor '" + tensors_[a].name + "' [offset " +
                        num(data_offset_ + infos[a].offset) + ", " + num(tensors_[a].nbytes) + " bytes]");
    }
}

// ---------------------------------------------------------------------------------------------
// Metadata getters

bool GGUFFile::has(std::string_view key) const { return kv_.find(key) != kv_.end(); }

const GGUFValue* GGUFFile::find_value(std::string_view key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void missing(const std::string& path, std::string_view key) {
    throw Error(path + ": metadata key '" + std::string(key) + "' is missing");
}
[[noreturn]] void bad_type(const std::string& path, std::string_view key, const GGUFValue& v, const char* expected) {
    std::string got(gguf_type_name(v.type));
    if (v.type == GGUFType::ARRAY) got += " of " + std::string(gguf_type_name(v.elem_type));
    throw Error(path + ": metadata key '" + std::string(key) + "' has type " + got + ", expected " + expected);
}
}  // namespace

uint64_t GGUFFile::get_u64(std::string_view key) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    if (is_unsigned(v->type)) return v->u;
    if (is_signed(v->type)) {
        if (v->i < 0)
            throw Error(path_ + ": metadata key '" + std::string(key) + "' is " + std::to_string(v->i) +
                        ", expected a non-negative integer");
        return uint64_t(v->i);
    }
    bad_type(path_, key, *v, "an unsigned integer");
}

int64_t GGUFFile::get_i64(std::string_view key) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    if (is_signed(v->type)) return v->i;
    if (is_unsigned(v->type)) {
        if (v->u > uint64_t(std::numeric_limits<int64_t>::max()))
            throw Error(path_ + ": metadata key '" + std::string(key) + "' is " + num(v->u) +
                        ", too large for a signed 64-bit integer");
        return int64_t(v->u);
    }
    bad_type(path_, key, *v, "an integer");
}

double GGUFFile::get_f64(std::string_view key) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    if (is_float(v->type)) return v->f;
    if (is_signed(v->type)) return double(v->i);
    if (is_unsigned(v->type)) return double(v->u);
    bad_type(path_, key, *v, "a number");
}

bool GGUFFile::get_bool(std::string_view key) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    if (v->type != GGUFType::BOOL) bad_type(path_, key, *v, "BOOL");
    return v->i != 0;
}

const std::string& GGUFFile::get_string(std::string_view key) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    if (v->type != GGUFType::STRING) bad_type(path_, key, *v, "STRING");
    return v->s;
}

const std::vector<std::string>& GGUFFile::get_string_array(std::string_view key) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    if (v->type != GGUFType::ARRAY || v->elem_type != GGUFType::STRING) bad_type(path_, key, *v, "ARRAY of STRING");
    return v->strings;
}

std::vector<float> GGUFFile::get_f32_array(std::string_view key) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    if (v->type != GGUFType::ARRAY || v->elem_type == GGUFType::STRING) bad_type(path_, key, *v, "an ARRAY of numbers");
    std::vector<float> out;
    if (is_float(v->elem_type)) {
        out.reserve(v->floats.size());
        for (double d : v->floats) out.push_back(float(d));
    } else {
        out.reserve(v->ints.size());
        for (int64_t i : v->ints) out.push_back(float(i));
    }
    return out;
}

std::vector<int32_t> GGUFFile::get_i32_array(std::string_view key) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    if (v->type != GGUFType::ARRAY || !(is_signed(v->elem_type) || is_unsigned(v->elem_type) ||
                                        v->elem_type == GGUFType::BOOL))
        bad_type(path_, key, *v, "an ARRAY of integers");
    std::vector<int32_t> out;
    out.reserve(v->ints.size());
    for (size_t k = 0; k < v->ints.size(); k++) {
        int64_t x = v->ints[k];
        bool big_unsigned = v->elem_type == GGUFType::UINT64 && x < 0;
        if (big_unsigned || x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
            throw Error(path_ + ": metadata key '" + std::string(key) + "' element " + num(k) +
                        " does not fit in a 32-bit integer");
        out.push_back(int32_t(x));
    }
    return out;
}

uint64_t GGUFFile::get_u64_or(std::string_view key, uint64_t dflt) const { return has(key) ? get_u64(key) : dflt; }
double GGUFFile::get_f64_or(std::string_view key, double dflt) const { return has(key) ? get_f64(key) : dflt; }
bool GGUFFile::get_bool_or(std::string_view key, bool dflt) const { return has(key) ? get_bool(key) : dflt; }
std::string GGUFFile::get_string_or(std::string_view key, const std::string& dflt) const {
    return has(key) ? get_string(key) : dflt;
}

std::string GGUFFile::value_str(std::string_view key, size_t max_len) const {
    const GGUFValue* v = find_value(key);
    if (!v) missing(path_, key);
    auto clip = [&](std::string s) {
        if (s.size() > max_len && max_len >= 3) s = s.substr(0, max_len - 3) + "...";
        return s;
    };
    switch (v->type) {
        case GGUFType::STRING: return clip(quoted(v->s));
        case GGUFType::BOOL: return v->i ? "true" : "false";
        case GGUFType::FLOAT32: case GGUFType::FLOAT64: return fmt_float(v->f, v->type);
        case GGUFType::ARRAY: break;
        default: return is_unsigned(v->type) ? num(v->u) : std::to_string(v->i);
    }
    const size_t n = v->array_size();
    std::string s = "[";
    for (size_t k = 0; k < n && s.size() <= max_len; k++) {
        if (k) s += ", ";
        if (v->elem_type == GGUFType::STRING) s += quoted(v->strings[k]);
        else if (is_float(v->elem_type)) s += fmt_float(v->floats[k], v->elem_type);
        else if (v->elem_type == GGUFType::UINT64) s += num(uint64_t(v->ints[k]));
        else s += std::to_string(v->ints[k]);
    }
    s += "]";
    if (s.size() <= max_len) return s;
    std::string what = v->elem_type == GGUFType::STRING ? "strings"
                       : std::string(gguf_type_name(v->elem_type)) + " values";
    std::string summary = "[";  // built by appending: GCC 12 misreports "lit" + std::string&& (-Wrestrict)
    summary += num(n);
    summary += ' ';
    summary += what;
    summary += ']';
    return summary;
}

// ---------------------------------------------------------------------------------------------
// Tensors

const TensorView* GGUFFile::find(std::string_view name) const { return find_tensor(tensors_, name); }

const TensorView& GGUFFile::require(std::string_view name, std::initializer_list<DType> types,
                                    const std::vector<int64_t>& shape) const {
    return require_tensor(tensors_, path_, name, types, shape);
}

}  // namespace ridge
