/*
 * Exact clamped sums per cell in one pass over the rows: dpframe._backends._sums.
 *
 * One function, add_sums, adds to an int64 table, for each grid (a transformation of
 * the values: clamp; optionally centre; optionally square and re-centre; or count the
 * values present), every row's value in whole grid steps, to the row's cell. It is the
 * per-row computation of the numpy reference (clip, subtract, multiply by the inverse
 * step, round half to even) in the same order on IEEE doubles, so each row's units are
 * the same integers; they are then added in int64, exactly (no float sum at all).
 *
 * Exactness needs:
 *   - no contraction of a*b+c into a fused multiply-add (setup.py passes
 *     -ffp-contract=off / /fp:precise), and no -ffast-math;
 *   - |units| <= 2**32 per row (checked on the grid's extremes before any row is
 *     read: a larger grid is an error, never a wrap);
 *   - at most 2**29 rows per call (checked), into a table that starts at zero (the
 *     caller's job), so that no int64 sum can exceed 2**61.
 * Rows whose value is NaN add nothing (and are not counted as present); rows outside
 * the mask go to cell 0, the cell of no key, which the caller drops (with no code
 * columns, the table has two cells: that one and the total).
 *
 * The GIL is released while the rows are summed, so Dask's threads run in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_buffers.h"

#if defined(_MSC_VER) && !defined(__clang__)
#define restrict __restrict /* MSVC's C spells it so */
#endif

#define BLOCK 2048
#define MAX_COLUMNS 32
#define MAX_GRIDS 8
/* 2**29 rows of at most 2**32 steps: no int64 sum can pass 2**61 */
#define MAX_ROWS ((Py_ssize_t)1 << 29)

/* Adding and subtracting 1.5 * 2**52 rounds a double of magnitude below 2**51 to an
 * integer, half to even, in the default rounding mode: exactly np.rint there. */
static const double ROUNDER = 6755399441055744.0;
static const double UNIT_LIMIT = 4294967296.0; /* 2**32 */

enum { CENTRED = 1, SQUARED = 2, PRESENT = 4 };

typedef struct {
    double lo, hi, inv_step, centre, square_centre;
    int flags;
} grid_spec;


/* Cell numbers of rows [start, start + n) into keys; -1 if a code is out of range. */
static int
block_keys(const code_column *columns, Py_ssize_t ncolumns, Py_ssize_t shift,
           const uint8_t *mask, Py_ssize_t start, Py_ssize_t n, int64_t *keys)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        keys[i] = shift;
    }
    for (Py_ssize_t j = 0; j < ncolumns; j++) {
        const code_column *c = &columns[j];
        int64_t smallest = 0, largest = -1;
#define ADD_CODES(type)                                                  \
    do {                                                                 \
        const type *codes = (const type *)c->data + start;               \
        for (Py_ssize_t i = 0; i < n; i++) {                             \
            int64_t code = codes[i];                                     \
            smallest = code < smallest ? code : smallest;                \
            largest = code > largest ? code : largest;                   \
            keys[i] += code * (int64_t)c->stride;                        \
        }                                                                \
    } while (0)
        switch (c->itemsize) {
        case 1: ADD_CODES(int8_t); break;
        case 2: ADD_CODES(int16_t); break;
        case 4: ADD_CODES(int32_t); break;
        default: ADD_CODES(int64_t); break;
        }
#undef ADD_CODES
        if (smallest < -1 || largest >= c->size) {
            return -1;
        }
    }
    if (mask != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            keys[i] = mask[start + i] ? keys[i] : 0;
        }
    }
    return 0;
}

/* One row's value in whole grid steps (the numpy reference's operations, in order). */
static inline double
grid_units_as(const grid_spec *g, double x, int flags)
{
    x = x < g->lo ? g->lo : x;
    x = x > g->hi ? g->hi : x;
    if (flags & CENTRED) {
        x -= g->centre;
    }
    if (flags & SQUARED) {
        x *= x;
        x -= g->square_centre;
        x = x < -g->square_centre ? -g->square_centre : x;
        x = x > g->square_centre ? g->square_centre : x;
    }
    x *= g->inv_step;
    return (x + ROUNDER) - ROUNDER;
}

static inline double
grid_units(const grid_spec *g, double x)
{
    return grid_units_as(g, x, g->flags);
}

/* Whether every value lands within 2**32 steps. The steps of a row are monotone in its
 * clamped value (or, squared, clamped to +-square_centre), so the bounds' steps, and
 * square_centre's, are the extremes: checked once, not per row. */
static int
grid_fits(const grid_spec *g)
{
    if (g->flags & PRESENT) {
        return 1;
    }
    double extremes[3] = {grid_units(g, g->lo), grid_units(g, g->hi), 0.0};
    if (g->flags & SQUARED) {
        extremes[2] = (g->square_centre * g->inv_step + ROUNDER) - ROUNDER;
    }
    for (int i = 0; i < 3; i++) {
        /* written so that NaN (an infinite bound minus itself) does not fit either */
        if (!(extremes[i] <= UNIT_LIMIT && extremes[i] >= -UNIT_LIMIT)) {
            return 0;
        }
    }
    return 1;
}

/* Rows [0, n) of one code column (codes NULL: no column, every row in cell 1), one grid:
 * each row's cell number is computed as it is read (code + 1; 0 outside the mask), and
 * the loop is specialised for each kind of grid. With counts, the same loop also counts
 * the values present (the count of a mean, without a loop of its own). -1 if a code lies
 * outside [-1, size). */
#define ROWS(type, UNITS)                                                            \
    for (Py_ssize_t i = 0; i < n; i++) {                                             \
        Py_ssize_t key = codes == NULL ? 1 : (Py_ssize_t)codes[i] + 1;               \
        if ((size_t)key > (size_t)size) {                                            \
            return -1;                                                               \
        }                                                                            \
        key = (mask == NULL || mask[i]) ? key : 0;                                   \
        double x = values[i];                                                        \
        int64_t present = (x == x);                                                  \
        table[key] += present ? (UNITS) : 0;                                         \
        if (counts != NULL) {                                                        \
            counts[key] += present;                                                  \
        }                                                                            \
    }
#define ADD_ONE_COLUMN(type)                                                         \
    static int add_one_column_##type(const grid_spec *g, const double *restrict values, \
                                     const type *restrict codes, Py_ssize_t size,    \
                                     const uint8_t *restrict mask, Py_ssize_t n,     \
                                     int64_t *restrict table,                        \
                                     int64_t *restrict counts)                       \
    {                                                                                \
        switch (g->flags) {                                                          \
        case 0: ROWS(type, (int64_t)grid_units_as(g, present ? x : 0.0, 0)) break;   \
        case CENTRED:                                                                \
            ROWS(type, (int64_t)grid_units_as(g, present ? x : 0.0, CENTRED)) break; \
        case CENTRED | SQUARED:                                                      \
            ROWS(type, (int64_t)grid_units_as(g, present ? x : 0.0, CENTRED | SQUARED)) \
            break;                                                                   \
        default:                                                                     \
            if (g->flags & PRESENT) {                                                \
                ROWS(type, 1)                                                        \
            }                                                                        \
            else {                                                                   \
                ROWS(type, (int64_t)grid_units(g, present ? x : 0.0))                \
            }                                                                        \
        }                                                                            \
        return 0;                                                                    \
    }
ADD_ONE_COLUMN(int8_t)
ADD_ONE_COLUMN(int16_t)
ADD_ONE_COLUMN(int32_t)
ADD_ONE_COLUMN(int64_t)
#undef ADD_ONE_COLUMN
#undef ROWS

static PyObject *
add_sums(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *values_obj, *codes, *sizes, *mask_obj, *grids, *out_obj;
    if (!PyArg_ParseTuple(args, "OO!O!OO!O:add_sums", &values_obj, &PyTuple_Type, &codes,
                          &PyTuple_Type, &sizes, &mask_obj, &PyTuple_Type, &grids,
                          &out_obj)) {
        return NULL;
    }
    Py_ssize_t ncolumns = PyTuple_GET_SIZE(codes), ngrids = PyTuple_GET_SIZE(grids);
    if (ncolumns != PyTuple_GET_SIZE(sizes) || ncolumns > MAX_COLUMNS) {
        PyErr_SetString(PyExc_ValueError, "one size per code column, at most 32 columns");
        return NULL;
    }
    if (ngrids < 1 || ngrids > MAX_GRIDS) {
        PyErr_SetString(PyExc_ValueError, "between 1 and 8 grids");
        return NULL;
    }
    grid_spec specs[MAX_GRIDS];
    for (Py_ssize_t k = 0; k < ngrids; k++) {
        grid_spec *g = &specs[k];
        if (!PyTuple_Check(PyTuple_GET_ITEM(grids, k))) {
            PyErr_SetString(PyExc_TypeError, "each grid must be a tuple");
            return NULL;
        }
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(grids, k), "dddddi", &g->lo, &g->hi,
                              &g->inv_step, &g->centre, &g->square_centre, &g->flags)) {
            return NULL;
        }
        if (!grid_fits(g)) {
            PyErr_SetString(PyExc_ValueError, "a value exceeds 2**32 grid steps");
            return NULL;
        }
    }

    Py_buffer views[MAX_COLUMNS + 3];
    int held = 0;
    PyObject *result = NULL;
    code_column columns[MAX_COLUMNS];
    const uint8_t *mask = NULL;
    Py_ssize_t full = 1, n;

    if (get_buffer(values_obj, &views[held], 0, "values") != 0) {
        goto done;
    }
    Py_buffer *values = &views[held++];
    if (values->itemsize != 8 || type_char(values) != 'd') {
        PyErr_SetString(PyExc_TypeError, "values must be float64");
        goto done;
    }
    n = values->len / 8;
    if (n > MAX_ROWS) {
        PyErr_SetString(PyExc_ValueError, "at most 2**29 rows per call (int64 sums)");
        goto done;
    }
    for (Py_ssize_t j = 0; j < ncolumns; j++) {
        if (get_buffer(PyTuple_GET_ITEM(codes, j), &views[held], 0, "codes") != 0) {
            goto done;
        }
        Py_buffer *view = &views[held++];
        Py_ssize_t size = PyNumber_AsSsize_t(PyTuple_GET_ITEM(sizes, j), PyExc_OverflowError);
        if (size < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "sizes must not be negative");
            }
            goto done;
        }
        if (!signed_format(view) || (view->itemsize != 1 && view->itemsize != 2
                                     && view->itemsize != 4 && view->itemsize != 8)
            || view->len / view->itemsize != n) {
            PyErr_SetString(PyExc_TypeError,
                            "codes must be signed integers, one per value");
            goto done;
        }
        columns[j].data = view->buf;
        columns[j].itemsize = view->itemsize;
        columns[j].size = size;
        if (full > PY_SSIZE_T_MAX / (size + 1)) {
            PyErr_SetString(PyExc_OverflowError, "too many cells");
            goto done;
        }
        full *= size + 1;
    }
    /* Row-major cell numbers over [s + 1 for s in sizes]; code + 1, so -1 is slice 0.
     * Without code columns, the table is [no cell, the total]: cell 0 must stay the
     * cell of no key, where the rows outside the mask go. */
    Py_ssize_t shift = 0, stride = 1;
    for (Py_ssize_t j = ncolumns - 1; j >= 0; j--) {
        columns[j].stride = stride;
        shift += stride;
        stride *= columns[j].size + 1;
    }
    if (ncolumns == 0) {
        full = 2;
        shift = 1;
    }
    if (mask_obj != Py_None) {
        if (get_buffer(mask_obj, &views[held], 0, "mask") != 0) {
            goto done;
        }
        Py_buffer *view = &views[held++];
        if (view->itemsize != 1 || type_char(view) != '?' || view->len != n) {
            PyErr_SetString(PyExc_TypeError, "mask must be bool, one per value");
            goto done;
        }
        mask = view->buf;
    }
    if (get_buffer(out_obj, &views[held], 1, "out") != 0) {
        goto done;
    }
    Py_buffer *out = &views[held++];
    if (full > PY_SSIZE_T_MAX / 8 / ngrids) {
        PyErr_SetString(PyExc_OverflowError, "too many cells");
        goto done;
    }
    if (out->itemsize != 8 || !signed_format(out) || out->len / 8 != full * ngrids) {
        PyErr_SetString(PyExc_TypeError, "out must be int64 of len(grids) * cells");
        goto done;
    }

    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    const double *data = values->buf;
    int64_t *tables = out->buf;
    /* A count grid rides along with the first grid of values, if there is one. */
    Py_ssize_t counted = -1, rider = -1;
    for (Py_ssize_t k = 0; k < ngrids; k++) {
        if ((specs[k].flags & PRESENT) && counted < 0) {
            counted = k;
        }
        else if (!(specs[k].flags & PRESENT) && rider < 0) {
            rider = k;
        }
    }
    if (rider < 0) {
        counted = -1;
    }
    /* One code column or none (the common case): the cell numbers are computed as the
     * codes are read (twice as fast as a pass of their own). Several columns: each
     * block's cell numbers, less one, are built first and read as the codes of one
     * column of full - 1 cells (the mask is applied there: 0 - 1 is no cell). */
    int64_t keys[BLOCK];
    for (Py_ssize_t start = 0; start < n && !failed; start += BLOCK) {
        Py_ssize_t count = n - start < BLOCK ? n - start : BLOCK;
        const double *block = data + start;
        const char *codes = NULL;
        Py_ssize_t itemsize = 1, size = 1;
        const uint8_t *kept = mask == NULL ? NULL : mask + start;
        if (ncolumns == 1) {
            codes = columns[0].data + start * columns[0].itemsize;
            itemsize = columns[0].itemsize;
            size = columns[0].size;
        }
        else if (ncolumns > 1) {
            if (block_keys(columns, ncolumns, shift, mask, start, count, keys) != 0) {
                failed = 1;
                break;
            }
            for (Py_ssize_t i = 0; i < count; i++) {
                keys[i] -= 1;
            }
            codes = (const char *)keys;
            itemsize = 8;
            size = full - 1;
            kept = NULL;
        }
        for (Py_ssize_t k = 0; k < ngrids && !failed; k++) {
            if (k == counted) {
                continue;
            }
            int64_t *table = tables + k * full;
            int64_t *counts = k == rider && counted >= 0 ? tables + counted * full : NULL;
            switch (itemsize) {
            case 1: failed = add_one_column_int8_t(&specs[k], block, (const int8_t *)codes, size, kept, count, table, counts); break;
            case 2: failed = add_one_column_int16_t(&specs[k], block, (const int16_t *)codes, size, kept, count, table, counts); break;
            case 4: failed = add_one_column_int32_t(&specs[k], block, (const int32_t *)codes, size, kept, count, table, counts); break;
            default: failed = add_one_column_int64_t(&specs[k], block, (const int64_t *)codes, size, kept, count, table, counts); break;
            }
        }
    }
    failed = failed ? 1 : 0;
    Py_END_ALLOW_THREADS
    if (failed == 1) {
        PyErr_SetString(PyExc_ValueError, "a code lies outside [-1, size)");
    }
    else {
        result = Py_NewRef(Py_None);
    }

done:
    for (int i = 0; i < held; i++) {
        PyBuffer_Release(&views[i]);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"add_sums", add_sums, METH_VARARGS,
     "add_sums(values, codes, sizes, mask, grids, out)\n--\n\n"
     "Add each row's clamped value in whole grid steps to its cell, per grid, in int64."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sums", "Exact clamped sums per cell, in one pass.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__sums(void)
{
    return PyModule_Create(&module);
}
