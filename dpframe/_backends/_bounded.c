/*
 * Bounded counts per cell without a row mask: dpframe._backends._bounded.
 *
 * A count needs, of contribution bounding, only how many rows each unit keeps in each
 * cell: min(m, max_rows) in each kept cell where it has m rows, and which cells it keeps
 * when it has more than max_groups. So rows are grouped by (unit, cell) as 32-bit keys,
 * cell in the low bits and unit in the high ones, which numpy sorts about twice as fast
 * as 64-bit keys:
 *
 *   partition_keys      splits the rows into chunks of 2**(32 - cell_bits) units (a
 *                       row's unit is its id minus first_unit, so dense integer ids
 *                       need no array of codes) and writes each row's key within its
 *                       chunk: a pass counting the rows of each chunk (unless the
 *                       caller gives each chunk's room: then False if one overflows),
 *                       then one computing cell numbers from the code columns a block
 *                       at a time (branch-free, vectorized) and scattering the keys;
 *   (numpy sorts each chunk)
 *   add_bounded_counts  one flat pass over each chunk's sorted keys: a row adds 1 to its
 *                       cell when it is among its unit's first max_rows rows there and
 *                       the cell among the unit's first max_groups, and records its
 *                       cell's first row and number in a slot per cell of the unit; a
 *                       unit found over max_groups then keeps a uniformly random
 *                       max_groups of its cells (Floyd's algorithm on Lemire's exact
 *                       uniform integers, from words the caller's cryptographic source
 *                       gives when asked), and only the cells whose fate differs from
 *                       what the pass added are changed, from the slots.
 *
 * Words are asked for only when a unit must choose, a batch at a time, with the GIL
 * taken back for the call. Rows with an id below first_unit, a negative cell code, or
 * outside the mask, are in no cell and are not written. Every index is checked where
 * it is used, against private copies of the limits (the caller's arrays
 * may share memory or change while the GIL is released): a unit beyond the chunks or a
 * cell beyond the table is an error, never a read or write out of bounds, and a
 * unit's choice reads only the slots the pass wrote, never the keys again.
 * The GIL is released while rows are read, so Dask's threads run in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_buffers.h"

#define MAX_CELL_BITS 24
/* The chunk size bounding.py uses for tables of up to 2**(32 - FAST_CHUNK_BITS) cells:
 * its loops shift by a constant. */
#define FAST_CHUNK_BITS 16

#define BLOCK 2048
#define MAX_COLUMNS 32

/* LOOP(type, shift) for the ids' type (int32 or int64, us bytes) and the chunks' shift:
 * a constant one for chunks of 2**FAST_CHUNK_BITS units, so the loop shifts by it. */
#define BY_ID_TYPE_AND_SHIFT(LOOP)                                              \
    do {                                                                        \
        if (us == 4 && chunk_bits == FAST_CHUNK_BITS) {                         \
            LOOP(int32_t, FAST_CHUNK_BITS);                                     \
        } else if (us == 4) {                                                   \
            LOOP(int32_t, chunk_bits);                                          \
        } else if (chunk_bits == FAST_CHUNK_BITS) {                             \
            LOOP(int64_t, FAST_CHUNK_BITS);                                     \
        } else {                                                                \
            LOOP(int64_t, chunk_bits);                                          \
        }                                                                       \
    } while (0)

/* VECTOR_CLONES: a function compiled twice, for AVX2 and for the baseline, gcc's loader
 * picking the one the CPU runs (glibc's ifunc, x86-64 Linux); elsewhere compiled once,
 * as with -DVECTOR_CLONES= (the baseline alone).
 * Integer code only: both versions compute the same. */
#if !defined(VECTOR_CLONES) && defined(__x86_64__) && defined(__linux__) &&                  \
    defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef VECTOR_CLONES
#define VECTOR_CLONES
#endif

/* Cell numbers of rows [start, start + n), below 2**24 (MAX_CELL_BITS): -1 for a row
 * with a missing code (any negative one); returns -1 if a code is beyond its domain.
 * Each column's loop is branch-free in the code's own type, so the compiler vectorizes
 * it; a block with a missing code (rare) is fixed in a second pass. Sums are taken in
 * uint32 (a code beyond its domain may overflow before it is found: no undefined
 * behaviour, and the block is refused). */
VECTOR_CLONES static int
block_cells(const code_column *columns, Py_ssize_t ncolumns, Py_ssize_t start, Py_ssize_t n,
            int32_t *cells)
{
    uint32_t *sums = (uint32_t *)cells;
    if (ncolumns == 0) {
        memset(sums, 0, (size_t)n * sizeof(uint32_t));
        return 0;
    }
    int any_missing = 0;
    for (Py_ssize_t j = 0; j < ncolumns; j++) {
        const code_column *c = &columns[j];
        const uint32_t stride = (uint32_t)c->stride;
        int64_t high, low;
#define ADD_CODES(type)                                                        \
    do {                                                                       \
        const type *codes = (const type *)c->data + start;                     \
        type lo = 0, hi = -1;                                                  \
        if (j == 0) {                                                          \
            for (Py_ssize_t i = 0; i < n; i++) {                               \
                const type code = codes[i];                                    \
                lo = code < lo ? code : lo;                                    \
                hi = code > hi ? code : hi;                                    \
                sums[i] = (uint32_t)code * stride;                             \
            }                                                                  \
        } else {                                                               \
            for (Py_ssize_t i = 0; i < n; i++) {                               \
                const type code = codes[i];                                    \
                lo = code < lo ? code : lo;                                    \
                hi = code > hi ? code : hi;                                    \
                sums[i] += (uint32_t)code * stride;                            \
            }                                                                  \
        }                                                                      \
        low = lo;                                                              \
        high = hi;                                                             \
    } while (0)
        switch (c->itemsize) {
        case 1: ADD_CODES(int8_t); break;
        case 2: ADD_CODES(int16_t); break;
        case 4: ADD_CODES(int32_t); break;
        default: ADD_CODES(int64_t); break;
        }
#undef ADD_CODES
        if (high >= c->size) {
            return -1;
        }
        any_missing |= low < 0;
    }
    if (any_missing) { /* a row with a negative code in any column is in no cell */
        for (Py_ssize_t j = 0; j < ncolumns; j++) {
            const code_column *c = &columns[j];
#define MARK_MISSING(type)                                                     \
    do {                                                                       \
        const type *codes = (const type *)c->data + start;                     \
        for (Py_ssize_t i = 0; i < n; i++) {                                   \
            cells[i] = codes[i] < 0 ? -1 : cells[i];                           \
        }                                                                      \
    } while (0)
            switch (c->itemsize) {
            case 1: MARK_MISSING(int8_t); break;
            case 2: MARK_MISSING(int16_t); break;
            case 4: MARK_MISSING(int32_t); break;
            default: MARK_MISSING(int64_t); break;
            }
#undef MARK_MISSING
        }
    }
    return 0;
}

/* partition_keys(units, first_unit, codes, sizes, mask, cell_bits, keys, offsets, ends)
 *
 * A row's unit is its id minus first_unit (ids below it: no unit), so dense integer ids
 * need no array of codes. Chunk k of units (k * 2**(32 - cell_bits) and up) gets keys[offsets[k] :
 * offsets[k + 1]], room for every row with a unit there; its rows in a cell (and in
 * the mask) fill keys[offsets[k] : ends[k]]. Cell numbers are row-major over the code
 * columns (none: every row in cell 0). */
static PyObject *
partition_keys(PyObject *self, PyObject *args)
{
    PyObject *units_obj, *codes, *sizes, *mask_obj, *keys_obj, *offsets_obj, *ends_obj;
    PyObject *room_obj = Py_None;
    long long first_unit;
    int cell_bits;
    if (!PyArg_ParseTuple(args, "OLO!O!OiOOO|O:partition_keys", &units_obj, &first_unit,
                          &PyTuple_Type, &codes, &PyTuple_Type, &sizes, &mask_obj, &cell_bits,
                          &keys_obj, &offsets_obj, &ends_obj, &room_obj)) {
        return NULL;
    }
    const Py_ssize_t ncolumns = PyTuple_GET_SIZE(codes);
    if (ncolumns > MAX_COLUMNS || PyTuple_GET_SIZE(sizes) != ncolumns) {
        PyErr_SetString(PyExc_ValueError, "one domain size per code column, at most 32");
        return NULL;
    }
    if (cell_bits < 0 || cell_bits > MAX_CELL_BITS) {
        PyErr_SetString(PyExc_ValueError, "need 0 <= cell_bits <= 24");
        return NULL;
    }
    Py_buffer views[MAX_COLUMNS + 6];
    int held = 0;
    PyObject *result = NULL;
    int64_t *counts = NULL;
    code_column columns[MAX_COLUMNS];
    Py_buffer *units =
        take_buffer(units_obj, views, &held, 0, 0, "ilqn", "units", "int32 or int64");
    if (units == NULL) goto done;
    const Py_ssize_t n = units->len / units->itemsize;
    if ((uintptr_t)units->buf % (uintptr_t)units->itemsize) {
        PyErr_SetString(PyExc_ValueError, "units must be aligned");
        goto done;
    }
    int64_t cell_count = 1;
    for (Py_ssize_t j = ncolumns - 1; j >= 0; j--) {
        if (get_buffer(PyTuple_GET_ITEM(codes, j), &views[held], 0, "codes") < 0) goto done;
        Py_buffer *view = &views[held++];
        const Py_ssize_t size = PyNumber_AsSsize_t(PyTuple_GET_ITEM(sizes, j), PyExc_OverflowError);
        if (size < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "domain sizes must be non-negative");
            }
            goto done;
        }
        if (!signed_format(view) || view->len / view->itemsize != n) {
            PyErr_SetString(PyExc_TypeError, "codes must be signed integers, one per unit code");
            goto done;
        }
        if ((uintptr_t)view->buf % (uintptr_t)view->itemsize) {
            PyErr_SetString(PyExc_ValueError, "codes must be aligned");
            goto done;
        }
        columns[j].data = view->buf;
        columns[j].itemsize = view->itemsize;
        columns[j].size = size;
        columns[j].stride = cell_count;
        if (size > 0 && cell_count > (((int64_t)1 << cell_bits) / size)) {
            PyErr_SetString(PyExc_ValueError, "the cells do not fit in cell_bits");
            goto done;
        }
        cell_count *= size;
    }
    if (cell_count > ((int64_t)1 << cell_bits)) {
        PyErr_SetString(PyExc_ValueError, "the cells do not fit in cell_bits");
        goto done;
    }
    const uint8_t *mask = NULL;
    if (mask_obj != Py_None) {
        Py_buffer *m = take_buffer(mask_obj, views, &held, 0, 1, "?", "mask", "bool");
        if (m == NULL) goto done;
        if (m->len != n) {
            PyErr_SetString(PyExc_ValueError, "mask must have one flag per row");
            goto done;
        }
        mask = (const uint8_t *)m->buf;
    }
    Py_buffer *keys_view = take_buffer(keys_obj, views, &held, 1, 4, "IL", "keys", "uint32");
    if (keys_view == NULL) goto done;
    const int given_room = room_obj != Py_None;
    if (!given_room && keys_view->len / 4 != n) {
        PyErr_SetString(PyExc_ValueError, "keys must have room for one key per row");
        goto done;
    }
    Py_buffer *offsets_view =
        take_buffer(offsets_obj, views, &held, 1, 8, "lqn", "offsets", "int64");
    if (offsets_view == NULL) goto done;
    const Py_ssize_t chunks = offsets_view->len / 8 - 1;
    Py_buffer *ends_view = take_buffer(ends_obj, views, &held, 1, 8, "lqn", "ends", "int64");
    if (ends_view == NULL) goto done;
    if (chunks < 1 || ends_view->len / 8 != chunks) {
        PyErr_SetString(PyExc_ValueError, "offsets and ends must have room for the chunks");
        goto done;
    }
    /* Private cursors and limits: what the caller's arrays hold may change under us
     * (they may share memory, or another thread may write them while the GIL is
     * released), so every write is checked against these. */
    /* counts and limits, then pass 1's tallies: slot 0 for rows without a unit, 1 to
     * chunks for the chunks, chunks + 1 for a unit beyond them; four interleaved tallies
     * of each (a row rarely waits for the increment of the row before it). */
    counts = calloc(2 * ((size_t)chunks + 1) + 4 * ((size_t)chunks + 2), sizeof(int64_t));
    if (counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *limits = counts + chunks + 1;
    int64_t *tallies = limits + chunks + 1;
    /* The room of each chunk, when the caller gives it (estimated from a sample of the
     * units): pass 1 is skipped, and a chunk with more rows than its room ends the call
     * with False, nothing else being wrong. */
    if (given_room) {
        Py_buffer *room = take_buffer(room_obj, views, &held, 0, 8, "lqn", "room", "int64");
        if (room == NULL) goto done;
        if (room->len / 8 != chunks) {
            PyErr_SetString(PyExc_ValueError, "room must have one entry per chunk");
            goto done;
        }
        const int64_t *rooms = room->buf;
        for (Py_ssize_t k = 0; k < chunks; k++) {
            const int64_t r = rooms[k];
            if (r < 0 || r > (int64_t)(keys_view->len / 4) - counts[k]) {
                PyErr_SetString(PyExc_ValueError, "the chunks' room must fit in the keys");
                goto done;
            }
            counts[k + 1] = counts[k] + r;
        }
    }
    const int64_t first = first_unit;
    const int chunk_bits = 32 - cell_bits;
    const uint32_t low_mask = chunk_bits == 32 ? 0xFFFFFFFFu : ((uint32_t)1 << chunk_bits) - 1;
    const char *u = units->buf;
    const Py_ssize_t us = units->itemsize;
    uint32_t *keys = keys_view->buf;
    int64_t *offsets = offsets_view->buf, *ends = ends_view->buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    /* Pass 1 (without a given room): rows per chunk, from the units alone (a row in no
     * cell leaves its room unused), and the check of every unit code. Chunks of 2**16
     * units (tables of up to 2**16 cells) have their own loop, with a constant shift. */
#define COUNT_UNITS(type, shift)                                                \
    do {                                                                        \
        const type *units_at = (const type *)u;                                 \
        for (Py_ssize_t i = 0; i < n; i++) {                                    \
            const int64_t id = units_at[i];                                     \
            const uint64_t chunk = ((uint64_t)id - (uint64_t)first) >> (shift); \
            const uint64_t slot = id < first ? 0                                \
                : chunk < (uint64_t)chunks ? chunk + 1 : (uint64_t)chunks + 1;  \
            tallies[(slot << 2) | (i & 3)]++;                                   \
        }                                                                       \
    } while (0)
    if (!given_room) {
        BY_ID_TYPE_AND_SHIFT(COUNT_UNITS);
        for (Py_ssize_t k = 1; k <= chunks + 1; k++) {
            const int64_t *tally = tallies + (k << 2);
            const int64_t rows = tally[0] + tally[1] + tally[2] + tally[3];
            if (k <= chunks) {
                counts[k] = rows;
            } else {
                bad = rows > 0; /* a unit beyond the chunks */
            }
        }
        for (Py_ssize_t k = 0; k < chunks && !bad; k++) {
            counts[k + 1] += counts[k];
        }
    }
#undef COUNT_UNITS
    if (!bad) {
        for (Py_ssize_t k = 0; k <= chunks; k++) {
            limits[k] = counts[k];
        }
        /* Pass 2: a block's cell numbers, then each kept row's key at the next place of
         * its chunk. */
        int32_t cells[BLOCK];
        for (Py_ssize_t start = 0; start < n && !bad; start += BLOCK) {
            const Py_ssize_t m = n - start < BLOCK ? n - start : BLOCK;
            if (block_cells(columns, ncolumns, start, m, cells) < 0) {
                bad = 2;
                break;
            }
            if (mask != NULL) {
                for (Py_ssize_t r = 0; r < m; r++) {
                    cells[r] = mask[start + r] ? cells[r] : -1;
                }
            }
#define SCATTER(type, shift)                                                        \
    do {                                                                            \
        const type *units_at = (const type *)u + start;                             \
        for (Py_ssize_t r = 0; r < m; r++) {                                        \
            const int64_t id = units_at[r];                                         \
            if (id < first) {                                                       \
                continue;                                                           \
            }                                                                       \
            const uint64_t unit = (uint64_t)id - (uint64_t)first;                   \
            const uint64_t chunk = unit >> (shift);                                 \
            /* a unit beyond the chunks, in a cell or not (as pass 1 finds it) */   \
            if (chunk >= (uint64_t)chunks) {                                        \
                bad = 1;                                                            \
                break;                                                              \
            }                                                                       \
            if (cells[r] < 0) {                                                     \
                continue;                                                           \
            }                                                                       \
            if (counts[chunk] >= limits[chunk + 1]) {                               \
                /* given, the room was too small; counted, the units changed */     \
                bad = given_room ? 6 : 1;                                           \
                break;                                                              \
            }                                                                       \
            const uint32_t low = (uint32_t)unit & low_mask;                         \
            keys[counts[chunk]++] = (low << (32 - (shift))) | (uint32_t)cells[r];   \
        }                                                                           \
    } while (0)
            BY_ID_TYPE_AND_SHIFT(SCATTER);
#undef SCATTER
        }
    }
    Py_END_ALLOW_THREADS
    if (!bad) { /* written once every key is: the caller's arrays, last */
        for (Py_ssize_t k = 0; k <= chunks; k++) {
            offsets[k] = limits[k];
        }
        for (Py_ssize_t k = 0; k < chunks; k++) {
            ends[k] = counts[k];
        }
    }
    if (bad == 6) { /* the given room was too small: the caller counts the rows */
        Py_INCREF(Py_False);
        result = Py_False;
        goto done;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad == 1 ? "a unit code beyond the chunks"
                                                   : "a code beyond its domain");
        goto done;
    }
    Py_INCREF(Py_True);
    result = Py_True;
done:
    free(counts);
    for (int i = 0; i < held; i++) {
        PyBuffer_Release(&views[i]);
    }
    return result;
}

/* The random words of the units' choices: 32-bit halves of the words draw(batch)
 * returns (a one-dimensional uint64 array, at least one word), drawn only when needed,
 * with the GIL taken back for the call. The halves of successive calls make one stream
 * of independent uniform halves, so a unit may continue its choice on a new batch. */
typedef struct {
    PyObject *draw;
    Py_ssize_t batch;
    Py_buffer view;
    int held;
    const uint32_t *halves;
    Py_ssize_t count, used;
} word_stream;

/* Called without the GIL (which *save holds): the next batch, or -1 with an exception
 * set (draw failed, or gave no words, or not uint64). */
static int
refill(word_stream *w, PyThreadState **save)
{
    int ok = -1;
    PyEval_RestoreThread(*save);
    if (w->held) {
        PyBuffer_Release(&w->view);
        w->held = 0;
    }
    w->halves = NULL;
    w->count = w->used = 0;
    PyObject *words = PyObject_CallFunction(w->draw, "n", w->batch);
    if (words != NULL) {
        if (get_buffer(words, &w->view, 0, "words") == 0) {
            w->held = 1;
            const char c = type_char(&w->view);
            if (w->view.itemsize != 8 || c == 0 || strchr("LkQN", c) == NULL) {
                PyErr_SetString(PyExc_TypeError, "the source's words must be uint64");
            } else if (w->view.len < 8) {
                PyErr_SetString(PyExc_ValueError, "the source gave no words");
            } else {
                w->halves = (const uint32_t *)w->view.buf;
                w->count = w->view.len / 4;
                ok = 0;
            }
        }
        Py_DECREF(words);
    }
    *save = PyEval_SaveThread();
    return ok;
}

/* Lemire's method: an integer uniform in [0, bound), bound in [1, 2**32], into *out; 0,
 * or -1 with an exception set. Each accepted value has exactly floor(2**32 / bound)
 * preimages, whatever the rejections before it. Uniform halves are rejected with
 * probability below bound / 2**32: 64 rejections in a row mean words that are not. */
static inline int
uniform_below(word_stream *w, PyThreadState **save, uint64_t bound, uint64_t *out)
{
    for (int tries = 0; tries < 64; tries++) {
        if (w->used == w->count && refill(w, save) < 0) {
            return -1;
        }
        const uint64_t m = (uint64_t)w->halves[w->used++] * bound;
        /* 2**32 mod bound < bound: only a low part below the bound may be rejected, so
         * the division is rarely needed. */
        if ((uint32_t)m >= bound || (uint32_t)m >= (((uint64_t)1 << 32) - bound) % bound) {
            *out = m >> 32;
            return 0;
        }
    }
    PyEval_RestoreThread(*save);
    PyErr_SetString(PyExc_ValueError, "64 draws in a row rejected: the words are not uniform");
    *save = PyEval_SaveThread();
    return -1;
}

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define NOINLINE __declspec(noinline)
#else
#define NOINLINE
#endif

/* OPAQUE(x): the compiler no longer knows what x holds (here, that it is 0 or 1), so it
 * keeps a mask computed from it instead of turning it into a branch. */
#if defined(__GNUC__)
#define OPAQUE(x) __asm__("" : "+r"(x))
#else
#define OPAQUE(x) ((void)0)
#endif

/* What the pass records of the unit it is reading: slot p, for the unit's p-th cell
 * (from 0, in key order), holds the cell's first row << CELL_SHIFT | the cell, written
 * by each of its rows (one store, no branch). The choice's marks (all 0 between units)
 * and picks have a slot per cell too. Grown (doubled) when a unit has more cells than
 * room. */
#define CELL_SHIFT 24 /* MAX_CELL_BITS: rows below 2**40 */
typedef struct {
    uint64_t *starts;
    uint8_t *chosen;
    uint32_t *picks;
    int64_t room;
} unit_scratch;

static void
free_scratch(unit_scratch *s)
{
    free(s->starts);
    free(s->chosen);
    free(s->picks);
    s->starts = NULL;
    s->chosen = NULL;
    s->picks = NULL;
    s->room = 0;
}

/* Room for at least `needed` cells, keeping what the slots hold: 0, or -1 (no memory,
 * and the scratch is freed). */
static int
grow_scratch(unit_scratch *s, int64_t needed)
{
    int64_t room = s->room > 0 ? s->room : 1024;
    while (room < needed) {
        room *= 2;
    }
    if ((uint64_t)room > SIZE_MAX / sizeof(uint64_t)) {
        free_scratch(s);
        return -1;
    }
    uint64_t *starts = realloc(s->starts, (size_t)room * sizeof(uint64_t));
    if (starts != NULL) {
        s->starts = starts;
    }
    uint8_t *chosen = realloc(s->chosen, (size_t)room);
    if (chosen != NULL) {
        s->chosen = chosen;
        memset(chosen + s->room, 0, (size_t)(room - s->room)); /* new marks: 0 */
    }
    uint32_t *picks = realloc(s->picks, (size_t)room * sizeof(uint32_t));
    if (picks != NULL) {
        s->picks = picks;
    }
    if (starts == NULL || chosen == NULL || picks == NULL) {
        free_scratch(s);
        return -1;
    }
    s->room = room;
    return 0;
}

/* The rows the pass counts in the unit's p-th cell if it adds it: min(its rows,
 * max_rows), its rows running to the next cell's first row, or to `stop`. */
static inline uint64_t
counted_in(const uint64_t *starts, int64_t p, int64_t groups, int64_t stop, int64_t max_rows)
{
    const int64_t next = p + 1 < groups ? (int64_t)(starts[p + 1] >> CELL_SHIFT) : stop;
    const int64_t rows = next - (int64_t)(starts[p] >> CELL_SHIFT);
    return (uint64_t)(rows < max_rows ? rows : max_rows);
}

#define CELL_OF(slot) ((slot) & (((uint64_t)1 << CELL_SHIFT) - 1))

/* The stream's place, in the caller's locals (stores to the marks, bytes, could alias
 * the stream's fields): a uniform integer below bound, by Lemire's method inline. A
 * half whose low product is at least the bound is accepted whatever the threshold
 * (below the bound); the rest, and the end of a batch, take uniform_below (the same
 * test, done exactly, and refills). 0, or -1 with the source's exception set. */
typedef struct {
    const uint32_t *halves;
    Py_ssize_t used, count;
} stream_place;

static inline int
draw_below(word_stream *stream, PyThreadState **save, stream_place *at, uint64_t bound,
           uint64_t *t)
{
    const uint64_t product = at->used < at->count ? (uint64_t)at->halves[at->used] * bound : 0;
    if (at->used < at->count && (uint32_t)product >= bound) {
        at->used++;
        *t = product >> 32;
        return 0;
    }
    stream->used = at->used;
    const int drawn = uniform_below(stream, save, bound, t);
    at->halves = stream->halves;
    at->used = stream->used, at->count = stream->count;
    return drawn;
}

#if defined(__GNUC__)
#define LOWEST_BIT(x) __builtin_ctzll(x)
#else
static inline int
LOWEST_BIT(uint64_t x)
{
    int p = 0;
    while (!(x & 1)) {
        x >>= 1;
        p++;
    }
    return p;
}
#endif

/* The unit just read, whose rows end before `stop`, has k = `groups` cells, more than
 * max_groups, recorded in the scratch; the pass added the rows of its first max_groups.
 * This keeps instead a uniformly random max_groups of its cells: Floyd's algorithm
 * picks the smaller of the kept and the dropped sets (the kept one when k > 2 *
 * max_groups, as bounding._drop_flags does), and only the cells whose fate differs
 * from the pass's are changed: at most 2 * min(max_groups, k - max_groups) additions,
 * whatever the unit's rows. Up to 64 cells, the picks are bits of a word (no loop-
 * carried memory) and the changed cells its set bits; more, marks in the scratch.
 * Everything comes from the slots the pass wrote, nothing from the keys (draw() runs
 * Python code, which could change them). Returns 0, 2 (more than 2**32 cells) or 4 (the
 * source's exception is set). Called without the GIL (which *save holds). */
static NOINLINE int
choose_cells(unit_scratch *scratch, int64_t stop, int64_t max_rows, int64_t max_groups,
             int64_t groups, uint64_t *table, word_stream *stream, PyThreadState **save)
{
    if (groups > ((int64_t)1 << 32)) { /* Lemire's bound: 2**32 at most */
        return 2;
    }
    const uint64_t *starts = scratch->starts;
    const int64_t keep_picked = groups > 2 * max_groups;
    const int64_t wanted = keep_picked ? max_groups : groups - max_groups;
    stream_place at = {stream->halves, stream->used, stream->count};
    int result = 0;
    if (groups <= 64) {
        uint64_t picked = 0;
        for (int64_t j = groups - wanted; j < groups; j++) {
            uint64_t t;
            if (draw_below(stream, save, &at, (uint64_t)j + 1, &t) < 0) {
                return 4;
            }
            /* bit t, or bit j when t is already picked (a mask, not a branch) */
            const uint64_t bit = (uint64_t)1 << t;
            const uint64_t taken = -((picked >> t) & 1);
            picked |= bit ^ ((bit ^ ((uint64_t)1 << j)) & taken);
        }
        stream->used = at.used;
        const uint64_t every = groups == 64 ? ~(uint64_t)0 : ((uint64_t)1 << groups) - 1;
        const uint64_t kept = keep_picked ? picked : every & ~picked;
        const uint64_t added = ((uint64_t)1 << max_groups) - 1; /* max_groups < 64 */
        /* One loop over the cells that change: kept and not added (add), or added and
         * not kept (take back), the sign a mask. */
        for (uint64_t change = kept ^ added; change; change &= change - 1) {
            const int64_t p = LOWEST_BIT(change);
            const uint64_t back = ((added >> p) & 1) ? ~(uint64_t)0 : 0;
            const uint64_t rows = counted_in(starts, p, groups, stop, max_rows);
            table[CELL_OF(starts[p])] += (rows ^ back) - back; /* rows, or -rows */
        }
        return 0;
    }
    uint8_t *chosen = scratch->chosen;
    uint32_t *picks = scratch->picks;
    int64_t m = 0;
    for (int64_t j = groups - wanted; j < groups; j++) {
        uint64_t t;
        if (draw_below(stream, save, &at, (uint64_t)j + 1, &t) < 0) {
            result = 4;
            break;
        }
        /* t, or j when t is already picked: a mask, not a branch (either is as likely),
         * and opaque to the compiler, which would make it one. */
        int64_t taken = chosen[t];
        OPAQUE(taken);
        const int64_t p = (int64_t)t + ((j - (int64_t)t) & -taken);
        chosen[p] = 1;
        picks[m++] = (uint32_t)p;
    }
    stream->used = at.used;
    /* The pass added the cells below max_groups. Masks, not branches: which cells
     * change is random. */
    if (result == 0 && keep_picked) { /* kept: the picks */
        for (int64_t q = 0; q < m; q++) {
            const int64_t p = picks[q];
            table[CELL_OF(starts[p])] += counted_in(starts, p, groups, stop, max_rows) &
                                         -(uint64_t)(p >= max_groups);
        }
        for (int64_t p = 0; p < max_groups; p++) {
            table[CELL_OF(starts[p])] -= counted_in(starts, p, groups, stop, max_rows) &
                                         -(uint64_t)(chosen[p] == 0);
        }
    } else if (result == 0) { /* dropped: the picks */
        for (int64_t q = 0; q < m; q++) {
            const int64_t p = picks[q];
            table[CELL_OF(starts[p])] -= counted_in(starts, p, groups, stop, max_rows) &
                                         -(uint64_t)(p < max_groups);
        }
        for (int64_t p = max_groups; p < groups; p++) {
            table[CELL_OF(starts[p])] += counted_in(starts, p, groups, stop, max_rows) &
                                         -(uint64_t)(chosen[p] == 0);
        }
    }
    for (int64_t q = 0; q < m; q++) {
        chosen[picks[q]] = 0;
    }
    return result;
}

/* add_bounded_counts(keys, offsets, ends, cell_bits, max_rows, max_groups, table, draw,
 *                    batch) -> units that chose their cells
 * Chunk k's sorted keys are keys[offsets[k] : ends[k]]; draw(batch) gives words. */
static PyObject *
add_bounded_counts(PyObject *self, PyObject *args)
{
    PyObject *keys_obj, *offsets_obj, *ends_obj, *table_obj, *draw;
    int cell_bits;
    long long max_rows, max_groups;
    Py_ssize_t batch;
    if (!PyArg_ParseTuple(args, "OOOiLLOOn:add_bounded_counts", &keys_obj, &offsets_obj,
                          &ends_obj, &cell_bits, &max_rows, &max_groups, &table_obj, &draw,
                          &batch)) {
        return NULL;
    }
    if (cell_bits < 0 || cell_bits > MAX_CELL_BITS || max_rows < 1 || max_groups < 1 ||
        batch < 1 || batch > ((Py_ssize_t)1 << 24)) {
        PyErr_SetString(PyExc_ValueError,
                        "need 0 <= cell_bits <= 24, positive bounds and 1 <= batch <= 2**24");
        return NULL;
    }
    if (!PyCallable_Check(draw)) {
        PyErr_SetString(PyExc_TypeError, "draw must be callable: draw(n) gives n uint64 words");
        return NULL;
    }
    Py_buffer views[4];
    int held = 0;
    PyObject *result = NULL;
    word_stream stream;
    memset(&stream, 0, sizeof stream);
    stream.draw = draw;
    stream.batch = batch;
    unit_scratch scratch = {NULL, NULL, NULL, 0};
    Py_buffer *keys_view = take_buffer(keys_obj, views, &held, 0, 4, "IL", "keys", "uint32");
    if (keys_view == NULL) goto done;
    Py_buffer *offsets_view =
        take_buffer(offsets_obj, views, &held, 0, 8, "lqn", "offsets", "int64");
    if (offsets_view == NULL) goto done;
    Py_buffer *ends_view = take_buffer(ends_obj, views, &held, 0, 8, "lqn", "ends", "int64");
    if (ends_view == NULL) goto done;
    Py_buffer *table_view =
        take_buffer(table_obj, views, &held, 1, 8, "lqn", "table", "int64");
    if (table_view == NULL) goto done;

    const uint32_t *keys = keys_view->buf;
    const Py_ssize_t n = keys_view->len / 4;
    const int64_t *offsets = offsets_view->buf;
    const Py_ssize_t chunks = offsets_view->len / 8 - 1;
    /* Counts are added in uint64 (wrapping, never undefined, whatever the table held). */
    uint64_t *table = table_view->buf;
    const int64_t cells = table_view->len / 8;
    const int64_t *ends = ends_view->buf;
    if (ends_view->len / 8 != chunks) {
        PyErr_SetString(PyExc_ValueError, "one end per chunk");
        goto done;
    }
    if (cells < ((int64_t)1 << cell_bits)) { /* then no row's cell needs checking */
        PyErr_SetString(PyExc_ValueError, "the table must have 2**cell_bits cells");
        goto done;
    }
    if ((uint64_t)n >> (64 - CELL_SHIFT)) { /* a slot holds a row below 2**40 */
        PyErr_SetString(PyExc_ValueError, "at most 2**40 keys");
        goto done;
    }
    const uint32_t cell_mask = ((uint32_t)1 << cell_bits) - 1;
    Py_ssize_t choosing = 0; /* units that chose their cells */
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    if (grow_scratch(&scratch, 1024) < 0) {
        bad = 5;
    }
    /* Local copies: stores to the table (int64) could otherwise alias the room. */
    uint64_t *slots = scratch.starts;
    int64_t room = scratch.room;
    /* One flat pass over each chunk's sorted keys (no inner loop per unit, whose exits
     * the CPU would mispredict once a unit): a row's rank in its cell counts the equal
     * keys before it, and it adds 1 when its rank is below max_rows and its cell is
     * among the unit's first max_groups. Each row also writes its cell's slot in the
     * scratch (the cell's first row and number); a unit found over max_groups then
     * chooses which cells it keeps from its slots (choose_cells). */
    for (Py_ssize_t k = 0; k < chunks && !bad; k++) {
        /* Read once and checked where used: the arrays may change under us. */
        const Py_ssize_t end = ends[k];
        Py_ssize_t i = offsets[k];
        if (i < 0 || i > end || end > n) {
            bad = 3;
            break;
        }
        if (i == end) {
            continue;
        }
        uint32_t previous = keys[i] ^ 0x80000000u; /* another unit: bit 31 is a unit bit */
        int64_t groups = 0, rank = 0;
        for (; i < end; i++) {
            /* Masks, not branches: a new unit comes every few rows, unpredictably. */
            const uint32_t key = keys[i];
            const int64_t same_unit = (key ^ previous) <= cell_mask; /* 0 or 1 */
            /* One flag, not two tests: a test of same_unit alone would be mispredicted. */
            const int ended_over = (groups > max_groups) & (int)(same_unit ^ 1);
            if (ended_over) { /* the unit before ended over max_groups: rare */
                bad = choose_cells(&scratch, i, max_rows, max_groups, groups, table, &stream,
                                   &_save);
                if (bad) {
                    break;
                }
                choosing++;
            }
            const int64_t new_cell = key != previous;
            groups = (groups & -same_unit) + new_cell; /* 1 at a new unit */
            rank = (rank + 1) & (new_cell - 1);        /* 0 at a new cell */
            previous = key;
            const uint32_t cell = key & cell_mask; /* within the table: checked above */
            table[cell] += (rank < max_rows) & (groups <= max_groups);
            if (groups > room) { /* rare: a unit with more cells than any before */
                if (grow_scratch(&scratch, groups) < 0) {
                    bad = 5;
                    break;
                }
                slots = scratch.starts;
                room = scratch.room;
            }
            slots[groups - 1] = (uint64_t)(i - rank) << CELL_SHIFT | cell;
        }
        if (!bad && groups > max_groups) { /* the chunk's last unit */
            bad = choose_cells(&scratch, end, max_rows, max_groups, groups, table, &stream,
                               &_save);
            choosing += !bad;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad && bad != 4) { /* 4: the source's exception is set */
        if (bad == 5) {
            PyErr_NoMemory();
        } else {
            PyErr_SetString(PyExc_ValueError, bad == 2 ? "a unit with more than 2**32 cells"
                                                       : "a chunk's keys beyond the keys");
        }
    }
    if (!bad) {
        result = PyLong_FromSsize_t(choosing);
    }
done:
    free_scratch(&scratch);
    if (stream.held) {
        PyBuffer_Release(&stream.view);
    }
    for (int i = 0; i < held; i++) {
        PyBuffer_Release(&views[i]);
    }
    return result;
}

/* The smallest and the largest of n > 0 int32 ids, in one pass: the AVX2 version reads
 * them as fast as memory gives them, about twice as fast as numpy's min and max (for
 * int64, AVX2 has no min or max, and numpy's are faster). */
VECTOR_CLONES static void
range_of(const int32_t *ids, Py_ssize_t n, int32_t *lowest, int32_t *highest)
{
    int32_t lo = ids[0], hi = ids[0];
    for (Py_ssize_t i = 1; i < n; i++) {
        lo = ids[i] < lo ? ids[i] : lo;
        hi = ids[i] > hi ? ids[i] : hi;
    }
    *lowest = lo;
    *highest = hi;
}

/* id_range(ids) -> (smallest, largest) of a non-empty int32 array. */
static PyObject *
id_range(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer views[1];
    int held = 0;
    PyObject *result = NULL;
    Py_buffer *ids = take_buffer(arg, views, &held, 0, 4, "il", "ids", "int32");
    if (ids == NULL) goto done;
    if ((uintptr_t)ids->buf % 4) {
        PyErr_SetString(PyExc_ValueError, "ids must be aligned");
        goto done;
    }
    const Py_ssize_t n = ids->len / 4;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "ids must not be empty");
        goto done;
    }
    int32_t lowest, highest;
    Py_BEGIN_ALLOW_THREADS
    range_of(ids->buf, n, &lowest, &highest);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("ii", (int)lowest, (int)highest);
done:
    for (int i = 0; i < held; i++) {
        PyBuffer_Release(&views[i]);
    }
    return result;
}

/* units_within(ids, first_unit, unit_count, limit) -> bool
 *
 * Whether every row has a unit (an id from first_unit to first_unit + unit_count - 1)
 * and no unit has more than `limit` rows (0 <= limit < 2**32 - 1). Counters of one byte
 * when limit < 255 (a table of unit_count bytes stays in cache; a counter that wraps
 * past 255 has passed the limit already), else of four. An id beyond the units is an
 * error. */
static PyObject *
units_within(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ids_obj;
    long long first_unit, unit_count, limit;
    if (!PyArg_ParseTuple(args, "OLLL:units_within", &ids_obj, &first_unit, &unit_count,
                          &limit)) {
        return NULL;
    }
    if (unit_count < 0 || limit < 0 || limit >= ((long long)1 << 32) - 1) {
        /* below 2**32 - 1: a four-byte counter passes the limit before it wraps */
        PyErr_SetString(PyExc_ValueError, "need unit_count >= 0 and 0 <= limit < 2**32 - 1");
        return NULL;
    }
    Py_buffer views[1];
    int held = 0;
    PyObject *result = NULL;
    Py_buffer *ids = take_buffer(ids_obj, views, &held, 0, 0, "ilqn", "ids", "int32 or int64");
    if (ids == NULL) goto done;
    if ((uintptr_t)ids->buf % (uintptr_t)ids->itemsize) {
        PyErr_SetString(PyExc_ValueError, "ids must be aligned");
        goto done;
    }
    const Py_ssize_t n = ids->len / ids->itemsize;
    const size_t width = limit < 255 ? 1 : 4;
    void *counters = calloc((size_t)unit_count + 1, width);
    if (counters == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint64_t units = (uint64_t)unit_count;
    const uint32_t most = (uint32_t)limit;
    uint64_t outside = 0, below = 0;
    uint32_t over = 0;
    Py_BEGIN_ALLOW_THREADS
#define COUNT_ROWS(type, counter)                                                   \
    do {                                                                            \
        const type *values = (const type *)ids->buf;                                \
        counter *tally = (counter *)counters;                                       \
        for (Py_ssize_t i = 0; i < n; i++) { /* every row: no exit that times the data */ \
            const int64_t id = values[i];                                           \
            const uint64_t unit = (uint64_t)id - (uint64_t)first_unit;              \
            below |= id < first_unit;                                               \
            outside |= (id >= first_unit) & (unit >= units);                        \
            /* rows without a unit, or beyond, count in the spare last slot */      \
            const uint64_t slot = unit < units ? unit : units;                      \
            const counter rows = (counter)(tally[slot] + 1);                        \
            tally[slot] = rows;                                                     \
            over |= (uint32_t)(rows > most) & (uint32_t)(slot < units);             \
        }                                                                           \
    } while (0)
    if (ids->itemsize == 4 && width == 1) {
        COUNT_ROWS(int32_t, uint8_t);
    } else if (ids->itemsize == 4) {
        COUNT_ROWS(int32_t, uint32_t);
    } else if (width == 1) {
        COUNT_ROWS(int64_t, uint8_t);
    } else {
        COUNT_ROWS(int64_t, uint32_t);
    }
#undef COUNT_ROWS
    Py_END_ALLOW_THREADS
    free(counters);
    if (outside) {
        PyErr_SetString(PyExc_ValueError, "an id beyond the units");
        goto done;
    }
    result = PyBool_FromLong(!(over | below));
done:
    for (int i = 0; i < held; i++) {
        PyBuffer_Release(&views[i]);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"id_range", id_range, METH_O,
     "id_range(ids)\n--\n\nThe smallest and the largest of a non-empty int32 array."},
    {"units_within", units_within, METH_VARARGS,
     "units_within(ids, first_unit, unit_count, limit)\n--\n\n"
     "Whether every row has a unit and no unit has more than limit rows."},
    {"partition_keys", partition_keys, METH_VARARGS,
     "partition_keys(units, first_unit, codes, sizes, mask, cell_bits, keys, offsets, ends)\n--\n\n"
     "Write each row's 32-bit (unit, cell) key into its chunk of units."},
    {"add_bounded_counts", add_bounded_counts, METH_VARARGS,
     "add_bounded_counts(keys, offsets, ends, cell_bits, max_rows, max_groups, table, draw, "
     "batch)\n--\n\n"
     "Add each unit's bounded rows per cell; a unit in more than max_groups cells keeps a "
     "uniformly random max_groups of them, from words draw(batch) gives. Return the number "
     "of such units."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bounded", "Bounded counts per cell, without a row mask.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__bounded(void)
{
    return PyModule_Create(&module);
}
