// `ridge tokenize`: text (-p TEXT or -f FILE) -> token ids with the model's tokenizer (GGUF
// metadata, a llama2.c tokenizer .bin via --tokenizer, or a synthetic model's byte stand-in).
// Prints "id<TAB>piece" per token, the piece as its decoded bytes with C-style escapes (special
// tokens as their stored text), or with --ids just the ids on one line.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tools/commands.h"
#include "tools/model_args.h"
#include "weights/error.h"
#include "weights/mapped_file.h"

namespace ridge::cli {

namespace {

struct TokenizeOptions {
    ModelArgs model;
    std::string prompt;
    bool prompt_set = false;
    std::string file_path;
    bool ids_only = false;
    bool no_bos = false;
    bool parse_special = false;
};

std::string read_binary_file(const std::string& path, const std::string& what) { return read_whole_file(path, what); }

// A piece for display: printable UTF-8 as is; backslash, control characters and bytes that are
// not part of a complete character as escapes.
std::string escape_piece(const std::string& s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (size_t pos = 0; pos < s.size();) {
        const utf8::ScanResult r = utf8::scan(s, pos);
        const unsigned char c = static_cast<unsigned char>(s[pos]);
        if (r.kind == utf8::Scan::Complete && r.length > 1) {
            out.append(s, pos, r.length);
            pos += r.length;
            continue;
        }
        switch (c) {
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\r': out += "\\r"; break;
            case '\\': out += "\\\\"; break;
            default:
                if (c < 0x20 || c >= 0x7F) {
                    out += "\\x";
                    out += hex[c >> 4];
                    out += hex[c & 15];
                } else {
                    out += char(c);
                }
        }
        ++pos;
    }
    return out;
}

void run_tokenize(const TokenizeOptions& o) {
    if (o.prompt_set == !o.file_path.empty())
        throw Error("tokenize: give exactly one of -p TEXT or -f FILE");
    const std::string text = o.prompt_set ? o.prompt : read_binary_file(o.file_path, "text file");
    utf8::require_valid(text, o.prompt_set ? std::string("-p text") : o.file_path);

    const std::unique_ptr<Tokenizer> tok = o.model.open_tokenizer();

    const bool add_bos = tok->add_bos_default() && !o.no_bos;
    const std::vector<int32_t> ids = tok->encode(text, add_bos, o.parse_special);

    std::string out;
    if (o.ids_only) {
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i) out += ' ';
            out += std::to_string(ids[i]);
        }
        out += '\n';
    } else {
        for (int32_t id : ids) {
            out += std::to_string(id);
            out += '\t';
            // Each token's own bytes (prev = -1: no "space after BOS" stripping); tokens that
            // decode to nothing (control tokens such as BOS) show their stored text.
            const std::string piece = tok->decode_piece(-1, id);
            out += escape_piece(piece.empty() ? tok->token_text(id) : piece);
            out += '\n';
        }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
}

}  // namespace

void register_tokenize(CLI::App& app) {
    auto o = std::make_shared<TokenizeOptions>();
    CLI::App* cmd = app.add_subcommand("tokenize", "show the token ids of a text");
    o->model.add_options(cmd);
    cmd->add_option("-p,--prompt", o->prompt, "text to tokenize")->each([o](const std::string&) {
        o->prompt_set = true;
    });
    cmd->add_option("-f,--file", o->file_path, "file whose contents to tokenize");
    cmd->add_flag("--ids", o->ids_only, "print only the ids, space-separated on one line");
    cmd->add_flag("--no-bos", o->no_bos, "do not prepend BOS even if the tokenizer adds it by default");
    cmd->add_flag("--parse-special", o->parse_special, "recognise special-token texts such as <|im_start|>");
    cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace ridge::cli
