// GGUFWriter: the inverse of weights/gguf.cpp. Layout (little-endian): "GGUF" u32 version 3,
// u64 n_tensors, u64 n_kv; n_kv x (string key, u32 type, value); n_tensors x (string name,
// u32 n_dims, u64 dims[n_dims], u32 type, u64 offset); zero padding to the alignment; tensor data,
// each tensor starting at a multiple of the alignment. A string is u64 length + bytes.
#include "weights/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#include "weights/error.h"

namespace ridge {

static_assert(std::endian::native == std::endian::little, "the GGUF writer assumes a little-endian host");

namespace {

constexpr uint32_t kVersion = 3;
constexpr size_t kDefaultAlignment = 32;

bool is_unsigned(GGUFType t) {
    return t == GGUFType::UINT8 || t == GGUFType::UINT16 || t == GGUFType::UINT32 || t == GGUFType::UINT64;
}
bool is_signed(GGUFType t) {
    return t == GGUFType::INT8 || t == GGUFType::INT16 || t == GGUFType::INT32 || t == GGUFType::INT64;
}
bool is_float(GGUFType t) { return t == GGUFType::FLOAT32 || t == GGUFType::FLOAT64; }

std::string type_str(GGUFType t) { return std::string(gguf_type_name(t)); }

// Range checks, so that what is written reads back as the same value.
void check_unsigned(const std::string& key, GGUFType t, uint64_t u) {
    const uint64_t max = t == GGUFType::UINT8 ? 0xffu : t == GGUFType::UINT16 ? 0xffffu
                         : t == GGUFType::UINT32 ? 0xffffffffu : std::numeric_limits<uint64_t>::max();
    if (u > max)
        throw Error("metadata key '" + key + "': value " + std::to_string(u) + " does not fit in " + type_str(t));
}
void check_signed(const std::string& key, GGUFType t, int64_t i) {
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    if (t == GGUFType::INT8) lo = -128, hi = 127;
    if (t == GGUFType::INT16) lo = -32768, hi = 32767;
    if (t == GGUFType::INT32) lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
    if (i < lo || i > hi)
        throw Error("metadata key '" + key + "': value " + std::to_string(i) + " does not fit in " + type_str(t));
}
void check_bool(const std::string& key, int64_t i) {
    if (i != 0 && i != 1)
        throw Error("metadata key '" + key + "': bool value " + std::to_string(i) + " is neither 0 nor 1");
}

// Checks one array element held in `ints` (the reader's form: unsigned elements as int64 bit patterns).
void check_int_elem(const std::string& key, GGUFType et, int64_t x) {
    if (et == GGUFType::BOOL) check_bool(key, x);
    else if (et == GGUFType::UINT64) return;  // any bit pattern is a valid u64
    else if (is_unsigned(et)) {
        if (x < 0) throw Error("metadata key '" + key + "': value " + std::to_string(x) + " does not fit in " + type_str(et));
        check_unsigned(key, et, uint64_t(x));
    } else check_signed(key, et, x);
}

// Serialises into a byte buffer (metadata and tensor infos are small next to the tensor data).
class Bytes {
public:
    template <class T>
    void put(T v) {
        const size_t at = b_.size();
        b_.resize(at + sizeof v);
        std::memcpy(b_.data() + at, &v, sizeof v);
    }
    void put_string(const std::string& s) {
        put<uint64_t>(s.size());
        b_.insert(b_.end(), s.begin(), s.end());
    }
    const std::vector<uint8_t>& data() const { return b_; }

private:
    std::vector<uint8_t> b_;
};

// One scalar: the unsigned member for UINT*, the signed one for INT* and BOOL, `f` for floats.
void put_scalar(Bytes& b, const std::string& key, GGUFType t, uint64_t u, int64_t i, double f, const std::string& s) {
    switch (t) {
        case GGUFType::UINT8: check_unsigned(key, t, u); b.put<uint8_t>(uint8_t(u)); break;
        case GGUFType::UINT16: check_unsigned(key, t, u); b.put<uint16_t>(uint16_t(u)); break;
        case GGUFType::UINT32: check_unsigned(key, t, u); b.put<uint32_t>(uint32_t(u)); break;
        case GGUFType::UINT64: b.put<uint64_t>(u); break;
        case GGUFType::INT8: check_signed(key, t, i); b.put<int8_t>(int8_t(i)); break;
        case GGUFType::INT16: check_signed(key, t, i); b.put<int16_t>(int16_t(i)); break;
        case GGUFType::INT32: check_signed(key, t, i); b.put<int32_t>(int32_t(i)); break;
        case GGUFType::INT64: b.put<int64_t>(i); break;
        case GGUFType::FLOAT32: b.put<float>(float(f)); break;
        case GGUFType::FLOAT64: b.put<double>(f); break;
        case GGUFType::BOOL: check_bool(key, i); b.put<uint8_t>(uint8_t(i)); break;
        case GGUFType::STRING: b.put_string(s); break;
        case GGUFType::ARRAY: throw Error("metadata key '" + key + "': nested arrays are not supported");
    }
}

void put_value(Bytes& b, const std::string& key, const GGUFValue& v) {
    if (uint32_t(v.type) > uint32_t(GGUFType::FLOAT64))
        throw Error("metadata key '" + key + "' has unknown value type " + std::to_string(uint32_t(v.type)));
    if (v.type != GGUFType::ARRAY) {
        put_scalar(b, key, v.type, v.u, v.i, v.f, v.s);
        return;
    }
    const GGUFType et = v.elem_type;
    if (uint32_t(et) > uint32_t(GGUFType::FLOAT64))
        throw Error("metadata key '" + key + "' has unknown array element type " + std::to_string(uint32_t(et)));
    if (et == GGUFType::ARRAY) throw Error("metadata key '" + key + "': nested arrays are not supported");
    b.put<uint32_t>(uint32_t(et));
    if (et == GGUFType::STRING) {
        b.put<uint64_t>(v.strings.size());
        for (const std::string& s : v.strings) b.put_string(s);
    } else if (is_float(et)) {
        b.put<uint64_t>(v.floats.size());
        for (double f : v.floats) put_scalar(b, key, et, 0, 0, f, {});
    } else {
        b.put<uint64_t>(v.ints.size());
        for (int64_t x : v.ints) {
            check_int_elem(key, et, x);
            put_scalar(b, key, et, uint64_t(x), x, 0, {});
        }
    }
}

size_t alignment_of(const std::string& path, const GGUFMetadata& metadata) {
    auto it = metadata.find("general.alignment");
    if (it == metadata.end()) return kDefaultAlignment;
    const GGUFValue& a = it->second;
    uint64_t al = 0;
    if (is_unsigned(a.type)) al = a.u;
    else if (is_signed(a.type) && a.i > 0) al = uint64_t(a.i);
    else
        throw Error(path + ": metadata key 'general.alignment' has type " + type_str(a.type) +
                    ", expected an unsigned integer");
    if (al < 8 || (al & (al - 1)) != 0 || al > (uint64_t(1) << 30))
        throw Error(path + ": general.alignment " + std::to_string(al) + " is not a power of two in [8, 2^30]");
    return size_t(al);
}

void check_tensor(const std::string& path, const GGUFTensorSpec& t) {
    const std::string tn = path + ": tensor '" + t.name + "'";
    if (t.shape.empty() || t.shape.size() > 4)
        throw Error(tn + " has " + std::to_string(t.shape.size()) + " dimensions (expected 1 to 4)");
    if (!dtype_from_u32(uint32_t(t.type)))
        throw Error(tn + " has unknown type " + std::to_string(uint32_t(t.type)));
    int64_t n = 1;
    for (int64_t d : t.shape) {
        if (d <= 0) throw Error(tn + " has shape " + shape_str(t.shape) + " (dimensions must be positive)");
        if (__builtin_mul_overflow(n, d, &n)) throw Error(tn + " element count overflows");
    }
    if (t.shape[0] % block_elems(t.type) != 0)
        throw Error(tn + " row length " + std::to_string(t.shape[0]) + " is not a multiple of the " +
                    std::string(dtype_name(t.type)) + " block size " + std::to_string(block_elems(t.type)));
}

}  // namespace

size_t GGUFTensorSpec::nbytes() const {
    size_t n = row_bytes(type, shape.empty() ? 0 : shape[0]);
    for (size_t d = 1; d < shape.size(); d++) n *= size_t(shape[d]);
    return n;
}

GGUFWriter::GGUFWriter(std::string path, const GGUFMetadata& metadata, std::vector<GGUFTensorSpec> tensors)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), tensors_(std::move(tensors)) {
    alignment_ = alignment_of(path_, metadata);

    // Everything before the data, built in memory first so that a bad value throws before any file exists.
    Bytes head;
    head.put<uint32_t>(0x46554747);  // "GGUF" as a little-endian u32
    head.put<uint32_t>(kVersion);
    head.put<uint64_t>(tensors_.size());
    head.put<uint64_t>(metadata.size());
    for (const auto& [key, value] : metadata) {
        head.put_string(key);
        head.put<uint32_t>(uint32_t(value.type));
        try {
            put_value(head, key, value);
        } catch (const Error& e) {
            throw Error(path_ + ": " + e.what());
        }
    }
    std::set<std::string, std::less<>> names;
    uint64_t offset = 0;
    offsets_.reserve(tensors_.size());
    for (const GGUFTensorSpec& t : tensors_) {
        check_tensor(path_, t);
        if (!names.insert(t.name).second) throw Error(path_ + ": duplicate tensor name '" + t.name + "'");
        head.put_string(t.name);
        head.put<uint32_t>(uint32_t(t.shape.size()));
        for (int64_t d : t.shape) head.put<uint64_t>(uint64_t(d));
        head.put<uint32_t>(uint32_t(t.type));
        head.put<uint64_t>(offset);
        offsets_.push_back(offset);
        offset += t.nbytes();
        offset += (alignment_ - offset % alignment_) % alignment_;
    }

    fp_ = std::fopen(tmp_path_.c_str(), "wb");
    if (!fp_) throw Error(path_ + ": cannot write (creating " + tmp_path_ + "): " + std::strerror(errno));
    try {
        put(head.data().data(), head.data().size());
        pad_to_alignment();
    } catch (...) {
        abandon();
        throw;
    }
    data_offset_ = size_t(written_);
}

GGUFWriter::~GGUFWriter() { abandon(); }

void GGUFWriter::abandon() {
    if (!fp_) return;
    std::fclose(fp_);
    fp_ = nullptr;
    std::remove(tmp_path_.c_str());
}

void GGUFWriter::put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, fp_) != n)
        throw Error(path_ + ": write failed at byte " + std::to_string(written_) + " (" + tmp_path_ +
                    "): " + std::strerror(errno));
    written_ += n;
}

void GGUFWriter::pad_to_alignment() {
    static const uint8_t zeros[64] = {};
    size_t pad = size_t((alignment_ - written_ % alignment_) % alignment_);
    while (pad > 0) {
        const size_t n = pad < sizeof zeros ? pad : sizeof zeros;
        put(zeros, n);
        pad -= n;
    }
}

void GGUFWriter::write(const void* data, size_t n) {
    if (!fp_) throw std::logic_error("GGUFWriter::write after close");
    const uint8_t* p = static_cast<const uint8_t*>(data);
    if (n == 0) return;
    if (cur_ >= tensors_.size())
        throw std::logic_error("GGUFWriter::write: " + std::to_string(n) + " bytes more than the tensors hold");
    const size_t want = tensors_[cur_].nbytes() - cur_filled_;
    if (n > want)
        throw std::logic_error("GGUFWriter::write: " + std::to_string(n) + " bytes for tensor '" +
                               tensors_[cur_].name + "', which has " + std::to_string(want) + " bytes left");
    try {
        put(p, n);
        cur_filled_ += n;
        if (cur_filled_ == tensors_[cur_].nbytes()) {
            pad_to_alignment();
            cur_++;
            cur_filled_ = 0;
        }
    } catch (...) {
        abandon();
        throw;
    }
}

void GGUFWriter::close() {
    if (!fp_) throw std::logic_error("GGUFWriter::close called twice");
    if (cur_ < tensors_.size()) {
        const std::string what = path_ + ": tensor '" + tensors_[cur_].name + "' got " + std::to_string(cur_filled_) +
                                 " of its " + std::to_string(tensors_[cur_].nbytes()) + " bytes";
        abandon();
        throw Error(what);
    }
    const bool flush_failed = std::fflush(fp_) != 0;
    const int flush_errno = errno;
    const bool close_failed = std::fclose(fp_) != 0;
    fp_ = nullptr;
    if (flush_failed || close_failed) {
        const std::string why = std::strerror(flush_failed ? flush_errno : errno);
        std::remove(tmp_path_.c_str());
        throw Error(path_ + ": write failed (" + tmp_path_ + "): " + why);
    }
    if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp_path_.c_str());
        throw Error(path_ + ": cannot rename " + tmp_path_ + " to it: " + why);
    }
}

}  // namespace ridge
