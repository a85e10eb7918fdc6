/*
 * Reading numpy arrays through the buffer protocol, shared by dpframe's C kernels
 * (_sums.c, _bounded.c): one-dimensional, C-contiguous, of one native scalar type.
 */
#ifndef DPFRAME_BUFFERS_H
#define DPFRAME_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The struct-module type character of a buffer of one native scalar type; 0 otherwise
 * (numpy writes "d" or "=d" for the same native float64, "<d" little-endian). */
static inline char
type_char(const Py_buffer *view)
{
    const char *f = view->format;
    if (f == NULL) {
        return 'B';
    }
    if (f[0] == '@' || f[0] == '=' || f[0] == (PY_LITTLE_ENDIAN ? '<' : '>')) {
        f++;
    }
    return (f[0] != '\0' && f[1] == '\0') ? f[0] : 0;
}

static inline int
signed_format(const Py_buffer *view)
{
    char c = type_char(view);
    return c != 0 && strchr("bhilqn", c) != NULL;
}

static inline int
get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous buffer", name);
        return -1;
    }
    if (view->ndim > 1) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s must be one-dimensional", name);
        return -1;
    }
    return 0;
}

/* views[*held] from obj, counted in *held (for the caller to release) once taken, and
 * checked to hold items of `itemsize` bytes whose type character is one of `chars`
 * (itemsize 0: 4 or 8 bytes); NULL with an exception set otherwise. */
static inline Py_buffer *
take_buffer(PyObject *obj, Py_buffer *views, int *held, int writable, Py_ssize_t itemsize,
            const char *chars, const char *name, const char *what)
{
    Py_buffer *view = &views[*held];
    if (get_buffer(obj, view, writable, name) < 0) {
        return NULL;
    }
    (*held)++;
    const char c = type_char(view);
    const int size_ok = itemsize ? view->itemsize == itemsize
                                 : (view->itemsize == 4 || view->itemsize == 8);
    if (!size_ok || c == 0 || strchr(chars, c) == NULL) {
        PyErr_Format(PyExc_TypeError, "%s must be %s", name, what);
        return NULL;
    }
    return view;
}

/* One code column of a table's cells (both kernels): codes of `itemsize` bytes, each
 * the position of a row's key in the column's domain, or negative (missing). */
typedef struct {
    const char *data;
    Py_ssize_t itemsize;
    int64_t size;   /* the column's domain size: codes lie in [-1, size) */
    int64_t stride; /* what one step of this column's code adds to a cell number */
} code_column;

#endif
