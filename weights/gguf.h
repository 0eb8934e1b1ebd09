// GGUFFile: a bounds-checked reader for GGUF v2/v3 model files over a read-only mmap.
// Parses the header, every metadata key/value (all value types, arrays included) and the
// tensor infos; tensors are TensorViews pointing into the mapping. Any defect in the file
// throws ridge::Error with one line naming the file, what is wrong and the byte offset or tensor.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weights/error.h"
#include "weights/tensor.h"

namespace ridge {

enum class GGUFType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view gguf_type_name(GGUFType t);

// One metadata value. Scalars use the member matching `type`; arrays hold their elements
// in the vector matching `elem_type` (all integer and bool arrays in `ints`, float arrays in
// `floats`, string arrays in `strings`; nested arrays are rejected as unsupported).
struct GGUFValue {
    GGUFType type = GGUFType::UINT32;
    GGUFType elem_type = GGUFType::UINT32;  // arrays only
    int64_t i = 0;          // signed ints, bools (0/1)
    uint64_t u = 0;         // unsigned ints
    double f = 0;           // FLOAT32 / FLOAT64
    std::string s;          // STRING
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    size_t array_size() const;
};

class MappedFile;

class GGUFFile {
public:
    // Maps and parses the file; throws ridge::Error on any defect.
    static std::unique_ptr<GGUFFile> open(const std::string& path);
    // Parses `size` bytes at `data` (no copy: the caller keeps them alive and unchanged for the
    // GGUFFile's lifetime); `name` stands for the path in messages. For the fuzzer and tests.
    static std::unique_ptr<GGUFFile> from_memory(const uint8_t* data, size_t size, std::string name);
    ~GGUFFile();
    GGUFFile(const GGUFFile&) = delete;
    GGUFFile& operator=(const GGUFFile&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    size_t file_size() const { return size_; }
    size_t alignment() const { return alignment_; }
    size_t data_offset() const { return data_offset_; }  // start of the tensor data section
    const uint8_t* data() const { return base_; }          // first byte of the file (the mapping)

    // Metadata. Getters throw ridge::Error naming the file and key when the key is missing or
    // has an incompatible type; integer getters accept any integer type whose value fits.
    bool has(std::string_view key) const;
    const GGUFValue* find_value(std::string_view key) const;
    const std::map<std::string, GGUFValue, std::less<>>& metadata() const { return kv_; }
    uint64_t get_u64(std::string_view key) const;
    int64_t get_i64(std::string_view key) const;
    double get_f64(std::string_view key) const;
    bool get_bool(std::string_view key) const;
    const std::string& get_string(std::string_view key) const;
    const std::vector<std::string>& get_string_array(std::string_view key) const;
    std::vector<float> get_f32_array(std::string_view key) const;
    std::vector<int32_t> get_i32_array(std::string_view key) const;
    // Defaults when absent (still throw when present with a bad type).
    uint64_t get_u64_or(std::string_view key, uint64_t dflt) const;
    double get_f64_or(std::string_view key, double dflt) const;
    bool get_bool_or(std::string_view key, bool dflt) const;
    std::string get_string_or(std::string_view key, const std::string& dflt) const;
    // Short printable form of a value ("[49152 strings]" for big arrays), for `ridge info`.
    std::string value_str(std::string_view key, size_t max_len = 80) const;

    // Tensors, in file order.
    const std::vector<TensorView>& tensors() const { return tensors_; }
    const TensorView* find(std::string_view name) const;
    // The named tensor, which must have one of `types` and exactly `shape` (GGUF order);
    // otherwise ridge::Error naming the file, the tensor, what was expected and what was found.
    const TensorView& require(std::string_view name, std::initializer_list<DType> types,
                              const std::vector<int64_t>& shape) const;

private:
    GGUFFile() = default;
    void parse();  // fills everything below from base_/size_; ridge::Error on any defect
    std::string path_;
    uint32_t version_ = 0;
    size_t size_ = 0;
    size_t alignment_ = 32;
    size_t data_offset_ = 0;
    const uint8_t* base_ = nullptr;  // the mapping
    std::map<std::string, GGUFValue, std::less<>> kv_;
    std::vector<TensorView> tensors_;
    std::shared_ptr<const MappedFile> map_;  // owns base_ when opened from a path
};

}  // namespace ridge
