/* Linked only into the GPU bundle's binaries (RIDGE_STATIC_RUNTIME), which carry libstdc++ and libgcc
 * inside them and must load on a machine with an older glibc (at most 2.34) than this one. Two
 * symbols that those static libraries take from a newer glibc are answered here instead, each with
 * glibc's contract, from calls that glibc 2.25 already has:
 *   arc4random       (glibc 2.36; libstdc++'s std::random_device, which ridge never uses)
 *   _dl_find_object  (glibc 2.35; libgcc's unwinder: which loaded object holds an address, and its
 *                    .eh_frame_hdr, to find the frame data an exception unwinds through) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

uint32_t arc4random(void) {
    uint32_t v = 0;
    while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
    }
    return v;
}

struct find_request {
    uintptr_t address;
    struct dl_find_object* result;
    int found;
};

/* dl_iterate_phdr's callback: whether this object's loaded segments hold the address. */
static int find_in_object(struct dl_phdr_info* info, size_t size, void* data) {
    struct find_request* f = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int inside = 0;
    void* eh_frame_hdr = NULL;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)* p = &info->dlpi_phdr[i];
        const uintptr_t start = info->dlpi_addr + p->p_vaddr, end = start + p->p_memsz;
        if (p->p_type == PT_LOAD) {
            if (start < lo) lo = start;
            if (end > hi) hi = end;
            if (f->address >= start && f->address < end) inside = 1;
        } else if (p->p_type == PT_GNU_EH_FRAME) {
            eh_frame_hdr = (void*)start;
        }
    }
    if (!inside) return 0;
    memset(f->result, 0, sizeof *f->result);
    f->result->dlfo_map_start = (void*)lo;
    f->result->dlfo_map_end = (void*)hi;
    f->result->dlfo_eh_frame = eh_frame_hdr;
    f->found = 1;
    return 1;
}

int _dl_find_object(void* address, struct dl_find_object* result) {
    struct find_request f = {(uintptr_t)address, result, 0};
    dl_iterate_phdr(find_in_object, &f);
    return f.found ? 0 : -1;
}
