// SPDX-License-Identifier: GPL-2.0
// The C interface of the Verilated blocks (rtl/ordma-rtl/src/ffi.rs mirrors the structs).
// Each call of *_cycle is one clock cycle: the inputs applied with the clock low, the
// combinational outputs sampled (what both sides of each handshake see in this cycle),
// then the rising edge.
#include <cstdint>
#include <cstring>

#include "verilated.h"
#include "Vicrc.h"
#include "Vmux.h"
#include "Vmux_lose.h"
#include "Vmux_bubble.h"

namespace {

template <class M> struct Inst {
    VerilatedContext ctx;
    M *m;
    Inst() {
        ctx.fatalOnError(false);
        ctx.errorLimit(1 << 30);
        ctx.assertOn(true);
        m = new M(&ctx, "top");
    }
    ~Inst() {
        m->final();
        delete m;
    }
};

template <class M> void reset(Inst<M> *i) {
    i->m->rst = 1;
    for (int k = 0; k < 2; k++) {
        i->m->clk = 0;
        i->m->eval();
        i->m->clk = 1;
        i->m->eval();
    }
    i->m->rst = 0;
}

}  // namespace

extern "C" {

struct ordma_icrc_io {
    uint32_t in_data[16];
    uint8_t in_valid, in_last, in_empty, out_ready;
    uint8_t in_ready, out_valid;
    uint32_t out_icrc;
};

void *ordma_icrc_new() {
    auto *i = new Inst<Vicrc>();
    reset(i);
    return i;
}

void ordma_icrc_free(void *p) { delete static_cast<Inst<Vicrc> *>(p); }

uint64_t ordma_icrc_errors(void *p) { return static_cast<Inst<Vicrc> *>(p)->ctx.errorCount(); }

void ordma_icrc_cycle(void *p, ordma_icrc_io *io) {
    Vicrc *m = static_cast<Inst<Vicrc> *>(p)->m;
    m->clk = 0;
    for (int w = 0; w < 16; w++) m->in_data[w] = io->in_data[w];
    m->in_valid = io->in_valid;
    m->in_last = io->in_last;
    m->in_empty = io->in_empty;
    m->out_ready = io->out_ready;
    m->eval();
    io->in_ready = m->in_ready;
    io->out_valid = m->out_valid;
    io->out_icrc = m->out_icrc;
    m->clk = 1;
    m->eval();
}

struct ordma_mux_io {
    uint64_t in_data[4];
    uint8_t in_valid, in_last, out_ready;
    uint8_t in_ready, out_valid, out_last, out_chan;
    uint64_t out_data;
};

#define MUX(NAME, CLASS)                                                                  \
    void *ordma_##NAME##_new() {                                                          \
        auto *i = new Inst<CLASS>();                                                      \
        reset(i);                                                                         \
        return i;                                                                         \
    }                                                                                     \
    void ordma_##NAME##_free(void *p) { delete static_cast<Inst<CLASS> *>(p); }           \
    uint64_t ordma_##NAME##_errors(void *p) {                                             \
        return static_cast<Inst<CLASS> *>(p)->ctx.errorCount();                           \
    }                                                                                     \
    void ordma_##NAME##_cycle(void *p, ordma_mux_io *io) {                                \
        CLASS *m = static_cast<Inst<CLASS> *>(p)->m;                                      \
        m->clk = 0;                                                                       \
        for (int c = 0; c < 4; c++) {                                                     \
            m->in_data[2 * c] = static_cast<uint32_t>(io->in_data[c]);                    \
            m->in_data[2 * c + 1] = static_cast<uint32_t>(io->in_data[c] >> 32);          \
        }                                                                                 \
        m->in_valid = io->in_valid;                                                       \
        m->in_last = io->in_last;                                                         \
        m->out_ready = io->out_ready;                                                     \
        m->eval();                                                                        \
        io->in_ready = m->in_ready;                                                       \
        io->out_valid = m->out_valid;                                                     \
        io->out_last = m->out_last;                                                       \
        io->out_chan = m->out_chan;                                                       \
        io->out_data = m->out_data;                                                       \
        m->clk = 1;                                                                       \
        m->eval();                                                                        \
    }

MUX(mux, Vmux)
MUX(mux_lose, Vmux_lose)
MUX(mux_bubble, Vmux_bubble)
}
