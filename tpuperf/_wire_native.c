/*
 * The hot loop of the XSpace decoder, in C: walk a line's event records and
 * their stats, writing their fields into flat int64 columns.
 *
 * This is an optional accelerator of tpuperf/xspace.py, which has the same
 * decoding in numpy and uses it when this module is not built. Both produce
 * the same columns (tests/test_xspace.py checks both against protobuf).
 *
 * Wire format reminders (xplane.proto):
 *   XLine.events = 4 (length-delimited XEvent records, back to back)
 *   XEvent: metadata_id = 1, offset_ps = 2, duration_ps = 3, stats = 4, num_occurrences = 5
 *   XStat: metadata_id = 1, double = 2 (fixed64), uint64 = 3, int64 = 4, str = 5,
 *          bytes = 6, ref = 7
 *
 * Columns are returned as bytearrays for numpy.frombuffer, so this module
 * needs nothing but the CPython API.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };
enum { EVENT_RECORD_TAG = 0x22 };
/* Stat kinds, as tpuperf.xspace.STAT_*. */
enum { STAT_NONE, STAT_DOUBLE, STAT_UINT64, STAT_INT64, STAT_STR, STAT_BYTES, STAT_REF };

/* Errors are reported by returning a message; NULL means success. Where in the buffer the
 * failure happened is kept per thread (loops run without the GIL, in several threads), and
 * raise_at() puts it in the message. */
typedef const char *failure;
static _Thread_local Py_ssize_t failed_at = -1;

static failure fail(failure message, Py_ssize_t at)
{
    failed_at = at;
    return message;
}

static void raise_at(failure message)
{
    if (failed_at >= 0)
        PyErr_Format(PyExc_ValueError, "%s, at byte %zd", message, failed_at);
    else
        PyErr_SetString(PyExc_ValueError, message);
    failed_at = -1;
}

static inline failure read_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end,
                                  uint64_t *out)
{
    if (*pos < end && buf[*pos] < 0x80) { /* one byte: tags, ids, small lengths */
        *out = buf[(*pos)++];
        return NULL;
    }
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*pos >= end)
            return fail("a varint runs past the end of its message (truncated file?)", *pos);
        uint8_t byte = buf[(*pos)++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *out = result;
            return NULL;
        }
    }
    return fail("a varint is longer than 10 bytes (not an XSpace protobuf)", *pos);
}

/* Read one field: its number, wire type, and value (varint or fixed64 bits) or
 * payload span (length-delimited). Leaves *pos after the field. */
static inline failure read_field(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, uint64_t *number,
                          int *wire, uint64_t *value, Py_ssize_t *payload_start)
{
    uint64_t tag;
    Py_ssize_t field_start = *pos;
    failure error = read_varint(buf, pos, end, &tag);
    if (error)
        return error;
    *number = tag >> 3;
    *wire = (int)(tag & 7);
    if (*number == 0) /* the offset of a bad field is where it starts, as numpy says it */
        return fail("field number 0 (not an XSpace protobuf)", field_start);
    switch (*wire) {
    case WIRE_VARINT:
        return read_varint(buf, pos, end, value);
    case WIRE_FIXED64:
        if (end - *pos < 8)
            return fail("a fixed64 value runs past the end of its message (truncated file?)", *pos);
        memcpy(value, buf + *pos, 8); /* little-endian on every platform tpuperf targets */
        *pos += 8;
        return NULL;
    case WIRE_LEN: {
        uint64_t length;
        error = read_varint(buf, pos, end, &length);
        if (error)
            return error;
        if (length > (uint64_t)(end - *pos))
            return fail("a field runs past the end of its message (truncated file?)", *pos);
        *payload_start = *pos;
        *value = length;
        *pos += (Py_ssize_t)length;
        return NULL;
    }
    case WIRE_FIXED32:
        if (end - *pos < 4)
            return fail("a fixed32 value runs past the end of its message (truncated file?)", *pos);
        *pos += 4;
        *value = 0;
        return NULL;
    default:
        return fail("invalid wire type (not an XSpace protobuf)", *pos);
    }
}

/* Walk the run of event records starting at `first`. With columns == NULL
 * only count events and stats; otherwise fill the columns. */
typedef struct {
    int64_t *metadata_id, *offset_ps, *duration_ps;
    int64_t *stat_owner, *stat_start, *stat_stop;
} event_columns;

static failure walk_events(const uint8_t *buf, Py_ssize_t first, Py_ssize_t stop,
                           event_columns *columns, Py_ssize_t *n_events, Py_ssize_t *n_stats,
                           Py_ssize_t *run_end)
{
    Py_ssize_t pos = first, events = 0, stats = 0;
    while (pos < stop && buf[pos] == EVENT_RECORD_TAG) {
        pos += 1;
        uint64_t length;
        failure error = read_varint(buf, &pos, stop, &length);
        if (error)
            return error;
        if (length > (uint64_t)(stop - pos))
            return fail("an event record runs past the end of its line (truncated file?)", pos);
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        if (columns) {
            columns->metadata_id[events] = 0;
            columns->offset_ps[events] = 0;
            columns->duration_ps[events] = 0;
        }
        while (pos < record_end) {
            uint64_t number, value = 0;
            int wire;
            Py_ssize_t payload = 0;
            error = read_field(buf, &pos, record_end, &number, &wire, &value, &payload);
            if (error)
                return error;
            if (number == 4 && wire == WIRE_LEN) {
                if (columns) {
                    columns->stat_owner[stats] = events;
                    columns->stat_start[stats] = payload;
                    columns->stat_stop[stats] = payload + (Py_ssize_t)value;
                }
                stats += 1;
            } else if (columns && wire == WIRE_VARINT) {
                if (number == 1)
                    columns->metadata_id[events] = (int64_t)value;
                else if (number == 2)
                    columns->offset_ps[events] = (int64_t)value;
                else if (number == 3)
                    columns->duration_ps[events] = (int64_t)value;
            }
        }
        events += 1;
    }
    *n_events = events;
    *n_stats = stats;
    *run_end = pos;
    return NULL;
}

static PyObject *new_column(Py_ssize_t n, Py_ssize_t item_size, void **data)
{
    PyObject *column = PyByteArray_FromStringAndSize(NULL, n * item_size);
    if (column)
        *data = PyByteArray_AS_STRING(column);
    return column;
}

/* event_records(data, first, stop) -> (run_end, metadata_id, offset_ps, duration_ps,
 *                                      stat_owner, stat_start, stat_stop) */
static PyObject *event_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t first, stop;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &first, &stop))
        return NULL;
    PyObject *result = NULL;
    PyObject *out[6] = {NULL};
    const uint8_t *buf = (const uint8_t *)view.buf;
    if (first < 0 || stop > view.len || first > stop) {
        PyErr_SetString(PyExc_ValueError, "line span outside the buffer");
        goto done;
    }
    Py_ssize_t n_events, n_stats, run_end;
    failure error;
    Py_BEGIN_ALLOW_THREADS
    error = walk_events(buf, first, stop, NULL, &n_events, &n_stats, &run_end);
    Py_END_ALLOW_THREADS
    if (error) {
        raise_at(error);
        goto done;
    }
    event_columns columns;
    void **slots[6] = {(void **)&columns.metadata_id, (void **)&columns.offset_ps,
                       (void **)&columns.duration_ps, (void **)&columns.stat_owner,
                       (void **)&columns.stat_start, (void **)&columns.stat_stop};
    for (int i = 0; i < 6; i++) {
        out[i] = new_column(i < 3 ? n_events : n_stats, 8, slots[i]);
        if (!out[i])
            goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    error = walk_events(buf, first, stop, &columns, &n_events, &n_stats, &run_end);
    Py_END_ALLOW_THREADS
    if (error) {
        raise_at(error);
        goto done;
    }
    result = Py_BuildValue("nOOOOOO", run_end, out[0], out[1], out[2], out[3], out[4], out[5]);
done:
    for (int i = 0; i < 6; i++)
        Py_XDECREF(out[i]);
    PyBuffer_Release(&view);
    return result;
}

/* stats(data, starts, stops) -> (metadata_id, kind, int_value, double_value, text_start,
 * text_stop); starts and stops are int64 buffers of XStat payload spans. */
static PyObject *stats(PyObject *self, PyObject *args)
{
    Py_buffer view, starts_view, stops_view;
    if (!PyArg_ParseTuple(args, "y*y*y*", &view, &starts_view, &stops_view))
        return NULL;
    PyObject *result = NULL;
    PyObject *out[6] = {NULL};
    Py_ssize_t n = starts_view.len / 8;
    if (stops_view.len != starts_view.len) {
        PyErr_SetString(PyExc_ValueError, "starts and stops differ in length");
        goto done;
    }
    int64_t *metadata_id, *int_value, *text_start, *text_stop;
    double *double_value;
    uint8_t *kind;
    void **slots[6] = {(void **)&metadata_id,  (void **)&kind,       (void **)&int_value,
                       (void **)&double_value, (void **)&text_start, (void **)&text_stop};
    for (int i = 0; i < 6; i++) {
        out[i] = new_column(n, i == 1 ? 1 : 8, slots[i]);
        if (!out[i])
            goto done;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    const int64_t *starts = (const int64_t *)starts_view.buf;
    const int64_t *stops = (const int64_t *)stops_view.buf;
    failure error = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !error; i++) {
        Py_ssize_t pos = starts[i], end = stops[i];
        metadata_id[i] = 0;
        kind[i] = STAT_NONE;
        int_value[i] = 0;
        double_value[i] = 0.0;
        text_start[i] = 0;
        text_stop[i] = 0;
        if (pos < 0 || end > view.len || pos > end) {
            error = fail("a stat lies outside the buffer", pos);
            break;
        }
        while (pos < end) {
            uint64_t number, value = 0;
            int wire;
            Py_ssize_t payload = 0;
            error = read_field(buf, &pos, end, &number, &wire, &value, &payload);
            if (error)
                break;
            if (number == 1 && wire == WIRE_VARINT) {
                metadata_id[i] = (int64_t)value;
            } else if (number == 2 && wire == WIRE_FIXED64) {
                kind[i] = STAT_DOUBLE;
                memcpy(&double_value[i], &value, 8);
            } else if ((number == 3 || number == 4 || number == 7) && wire == WIRE_VARINT) {
                kind[i] = number == 3 ? STAT_UINT64 : number == 4 ? STAT_INT64 : STAT_REF;
                int_value[i] = (int64_t)value;
            } else if ((number == 5 || number == 6) && wire == WIRE_LEN) {
                kind[i] = number == 5 ? STAT_STR : STAT_BYTES;
                text_start[i] = payload;
                text_stop[i] = payload + (Py_ssize_t)value;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (error) {
        raise_at(error);
        goto done;
    }
    result = Py_BuildValue("OOOOOO", out[0], out[1], out[2], out[3], out[4], out[5]);
done:
    for (int i = 0; i < 6; i++)
        Py_XDECREF(out[i]);
    PyBuffer_Release(&view);
    PyBuffer_Release(&starts_view);
    PyBuffer_Release(&stops_view);
    return result;
}

/* kind_runs(starts, ends, kinds, n_kinds) -> None, or a list of n_kinds + 1 (starts, ends)
 * pairs of int64 columns: the intervals of a line of ops sorted by start that neither nest
 * nor overlap, joined where they touch, for each kind (0 .. n_kinds - 1; -1 is none) and last
 * for all ops. Empty ops (end <= start) are left out; None when two ops overlap. The interval
 * sets of a TPU device: one pass instead of a dozen numpy ones per set. */
static PyObject *kind_runs(PyObject *self, PyObject *args)
{
    Py_buffer starts_view, ends_view, kinds_view;
    int n_kinds;
    if (!PyArg_ParseTuple(args, "y*y*y*i", &starts_view, &ends_view, &kinds_view, &n_kinds))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts_view.len / 8;
    const int64_t *starts = (const int64_t *)starts_view.buf;
    const int64_t *ends = (const int64_t *)ends_view.buf;
    const int8_t *kinds = (const int8_t *)kinds_view.buf;
    if (ends_view.len != starts_view.len || kinds_view.len != n || n_kinds < 0 || n_kinds > 100) {
        PyErr_SetString(PyExc_ValueError, "kind_runs: columns of different lengths");
        goto done;
    }
    Py_ssize_t sets = (Py_ssize_t)n_kinds + 1;
    Py_ssize_t *counts = PyMem_Calloc(sets, sizeof(Py_ssize_t));
    int64_t *last_end = PyMem_Calloc(sets, sizeof(int64_t));
    int64_t **out_starts = PyMem_Calloc(sets, sizeof(int64_t *));
    int64_t **out_ends = PyMem_Calloc(sets, sizeof(int64_t *));
    PyObject **columns = PyMem_Calloc(2 * sets, sizeof(PyObject *));
    if (!counts || !last_end || !out_starts || !out_ends || !columns) {
        PyErr_NoMemory();
        goto free;
    }
    int overlap = 0;
    for (int pass = 0; pass < 2 && !overlap; pass++) {
        if (pass == 1) {
            for (Py_ssize_t j = 0; j < sets; j++) {
                columns[2 * j] = new_column(counts[j], 8, (void **)&out_starts[j]);
                columns[2 * j + 1] = new_column(counts[j], 8, (void **)&out_ends[j]);
                if (!columns[2 * j] || !columns[2 * j + 1])
                    goto free;
                counts[j] = 0;
            }
        }
        int64_t reach = INT64_MIN;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t s = starts[i], e = ends[i];
            if (e <= s)
                continue;
            if (s < reach) {
                overlap = 1;
                break;
            }
            reach = e;
            int kind = kinds[i];
            Py_ssize_t wanted[2] = {kind >= 0 && kind < n_kinds ? kind : -1, n_kinds};
            for (int w = 0; w < 2; w++) {
                Py_ssize_t j = wanted[w];
                if (j < 0)
                    continue;
                Py_ssize_t c = counts[j];
                if (c > 0 && s <= last_end[j]) { /* touches the set's last interval: join */
                    if (pass == 1)
                        out_ends[j][c - 1] = e;
                } else {
                    if (pass == 1) {
                        out_starts[j][c] = s;
                        out_ends[j][c] = e;
                    }
                    counts[j] = c + 1;
                }
                last_end[j] = e;
            }
        }
        Py_END_ALLOW_THREADS
        if (pass == 0)
            for (Py_ssize_t j = 0; j < sets; j++)
                last_end[j] = 0;
    }
    if (overlap) {
        result = Py_None;
        Py_INCREF(result);
        goto free;
    }
    result = PyList_New(sets);
    if (!result)
        goto free;
    for (Py_ssize_t j = 0; j < sets; j++) {
        PyObject *pair = PyTuple_Pack(2, columns[2 * j], columns[2 * j + 1]);
        if (!pair) {
            Py_CLEAR(result);
            goto free;
        }
        PyList_SET_ITEM(result, j, pair);
    }
free:
    if (columns)
        for (Py_ssize_t j = 0; j < 2 * sets; j++)
            Py_XDECREF(columns[j]);
    PyMem_Free(counts);
    PyMem_Free(last_end);
    PyMem_Free(out_starts);
    PyMem_Free(out_ends);
    PyMem_Free(columns);
done:
    PyBuffer_Release(&starts_view);
    PyBuffer_Release(&ends_view);
    PyBuffer_Release(&kinds_view);
    return result;
}

/* dense_groups(keys, size) -> (group of each row, first row of each group) as int64
 * columns: keys are int64 in [0, size), groups numbered in order of first appearance (what
 * pandas' factorize gives). One pass where numpy makes five. */
static PyObject *dense_groups(PyObject *self, PyObject *args)
{
    Py_buffer keys_view;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y*n", &keys_view, &size))
        return NULL;
    PyObject *result = NULL, *codes = NULL, *firsts = NULL;
    Py_ssize_t n = keys_view.len / 8;
    const int64_t *keys = (const int64_t *)keys_view.buf;
    int64_t *code_of = NULL, *first = NULL, *out = NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "dense_groups: negative size");
        goto done;
    }
    code_of = PyMem_Malloc((size_t)(size > 0 ? size : 1) * sizeof(int64_t));
    first = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    codes = new_column(n, 8, (void **)&out);
    if (!code_of || !first || !codes) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t groups = 0, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < size; k++)
        code_of[k] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t key = keys[i];
        if (key < 0 || key >= size) {
            bad = i;
            break;
        }
        int64_t code = code_of[key];
        if (code < 0) {
            code = code_of[key] = groups;
            first[groups++] = i;
        }
        out[i] = code;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "dense_groups: key %lld outside [0, %zd)",
                     (long long)keys[bad], size);
        goto done;
    }
    int64_t *first_out;
    firsts = new_column(groups, 8, (void **)&first_out);
    if (!firsts)
        goto done;
    memcpy(first_out, first, (size_t)groups * sizeof(int64_t));
    result = PyTuple_Pack(2, codes, firsts);
done:
    Py_XDECREF(codes);
    Py_XDECREF(firsts);
    PyMem_Free(code_of);
    PyMem_Free(first);
    PyBuffer_Release(&keys_view);
    return result;
}

/* group_sums(groups, group_itemsize, values, n_groups) -> int64 column of n_groups sums, or
 * None when a group lies outside [0, n_groups). groups are int32 or int64 (group_itemsize 4
 * or 8), values int64; sums wrap as int64 arithmetic does (numpy's add.at gives the same). */
static PyObject *group_sums(PyObject *self, PyObject *args)
{
    Py_buffer groups_view, values_view;
    int itemsize;
    Py_ssize_t n_groups;
    if (!PyArg_ParseTuple(args, "y*iy*n", &groups_view, &itemsize, &values_view, &n_groups))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = values_view.len / 8;
    if ((itemsize != 4 && itemsize != 8) || groups_view.len != n * itemsize || n_groups < 0) {
        PyErr_SetString(PyExc_ValueError, "group_sums: groups and values differ in length");
        goto done;
    }
    uint64_t *sums;
    PyObject *column = new_column(n_groups, 8, (void **)&sums);
    if (!column)
        goto done;
    const int64_t *values = (const int64_t *)values_view.buf;
    const int32_t *g32 = (const int32_t *)groups_view.buf;
    const int64_t *g64 = (const int64_t *)groups_view.buf;
    int outside = 0;
    Py_BEGIN_ALLOW_THREADS
    memset(sums, 0, (size_t)n_groups * 8);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t g = itemsize == 4 ? (int64_t)g32[i] : g64[i];
        if (g < 0 || g >= n_groups) {
            outside = 1;
            break;
        }
        sums[g] += (uint64_t)values[i]; /* unsigned: wraps without undefined behaviour */
    }
    Py_END_ALLOW_THREADS
    if (outside) {
        Py_DECREF(column);
        result = Py_None;
        Py_INCREF(result);
    } else {
        result = column;
    }
done:
    PyBuffer_Release(&groups_view);
    PyBuffer_Release(&values_view);
    return result;
}

/* texts(data, starts, stops) -> list of str: each span of `data` decoded as UTF-8 (bad bytes
 * replaced); starts and stops are int64 buffers. Metadata names, tens of thousands a plane. */
static PyObject *texts(PyObject *self, PyObject *args)
{
    Py_buffer view, starts_view, stops_view;
    if (!PyArg_ParseTuple(args, "y*y*y*", &view, &starts_view, &stops_view))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts_view.len / 8;
    const int64_t *starts = (const int64_t *)starts_view.buf;
    const int64_t *stops = (const int64_t *)stops_view.buf;
    if (stops_view.len != starts_view.len) {
        PyErr_SetString(PyExc_ValueError, "starts and stops differ in length");
        goto done;
    }
    result = PyList_New(n);
    if (!result)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (starts[i] < 0 || stops[i] > view.len || starts[i] > stops[i]) {
            Py_CLEAR(result);
            PyErr_Format(PyExc_ValueError, "a string lies outside the buffer, at byte %lld",
                         (long long)starts[i]);
            goto done;
        }
        PyObject *text = PyUnicode_DecodeUTF8((const char *)view.buf + starts[i],
                                              (Py_ssize_t)(stops[i] - starts[i]), "replace");
        if (!text) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, text);
    }
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&starts_view);
    PyBuffer_Release(&stops_view);
    return result;
}

/* skip_records(data, first, stop) -> (run_end, n_events): the extent of the run of event
 * records at `first`, without decoding them. */
static PyObject *skip_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t first, stop;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &first, &stop))
        return NULL;
    PyObject *result = NULL;
    if (first < 0 || stop > view.len || first > stop) {
        PyErr_SetString(PyExc_ValueError, "line span outside the buffer");
        goto done;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t pos = first, events = 0;
    failure error = NULL;
    Py_BEGIN_ALLOW_THREADS
    while (pos < stop && buf[pos] == EVENT_RECORD_TAG) {
        pos += 1;
        uint64_t length;
        error = read_varint(buf, &pos, stop, &length);
        if (error)
            break;
        if (length > (uint64_t)(stop - pos)) {
            error = fail("an event record runs past the end of its line (truncated file?)", pos);
            break;
        }
        pos += (Py_ssize_t)length;
        events += 1;
    }
    Py_END_ALLOW_THREADS
    if (error) {
        raise_at(error);
        goto done;
    }
    result = Py_BuildValue("nn", pos, events);
done:
    PyBuffer_Release(&view);
    return result;
}

/* The value of one XStat payload as an int64, when it is an integer (int64, uint64 or ref):
 * returns 1 and sets *id and *value; 0 when it holds something else. */
static failure stat_int(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, uint64_t *id,
                        int64_t *value, int *is_int)
{
    *is_int = 0;
    *id = 0;
    while (pos < end) {
        uint64_t number, v = 0;
        int wire;
        Py_ssize_t payload = 0;
        failure error = read_field(buf, &pos, end, &number, &wire, &v, &payload);
        if (error)
            return error;
        if (number == 1 && wire == WIRE_VARINT) {
            *id = v;
        } else if ((number == 3 || number == 4 || number == 7) && wire == WIRE_VARINT) {
            *value = (int64_t)v;
            *is_int = 1;
        } else if (number >= 2 && number <= 7) {
            *is_int = 0; /* a later value field of another kind replaces the integer */
        }
    }
    return NULL;
}

#define MAX_WANTED 16
#define MISSING INT64_MIN

/* events(data, first, stop, wanted_ids, wanted_columns, n_columns, keep_column)
 *   -> (run_end, metadata_id, offset_ps, duration_ps, column_0, ..., column_{n-1})
 * The run of event records at `first`, with the integer stats whose metadata ids are in
 * `wanted_ids` (int64 buffer) written to output column `wanted_columns[i]` (int64 buffer);
 * an event without a stat gets INT64_MIN there. With keep_column >= 0, only events that have
 * that column's stat are kept. */
static PyObject *events(PyObject *self, PyObject *args)
{
    Py_buffer view, ids_view, cols_view;
    Py_ssize_t first, stop, n_columns, keep;
    if (!PyArg_ParseTuple(args, "y*nny*y*nn", &view, &first, &stop, &ids_view, &cols_view,
                          &n_columns, &keep))
        return NULL;
    PyObject *result = NULL;
    PyObject *out[3 + MAX_WANTED] = {NULL};
    int64_t *columns[3 + MAX_WANTED] = {NULL};
    Py_ssize_t n_wanted = ids_view.len / 8;
    const int64_t *wanted_ids = (const int64_t *)ids_view.buf;
    const int64_t *wanted_cols = (const int64_t *)cols_view.buf;
    const uint8_t *buf = (const uint8_t *)view.buf;
    failure error = NULL;
    Py_ssize_t n_events = 0, run_end = first, kept = 0;
    if (first < 0 || stop > view.len || first > stop || n_columns < 0 ||
        n_columns > MAX_WANTED || cols_view.len != ids_view.len || keep >= n_columns) {
        PyErr_SetString(PyExc_ValueError, "events: bad arguments");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_wanted; i++) {
        if (wanted_cols[i] < 0 || wanted_cols[i] >= n_columns) {
            PyErr_SetString(PyExc_ValueError, "events: a wanted column is out of range");
            goto done;
        }
    }
    /* One pass: columns sized for a typical event (16 bytes or more), grown when a line
     * holds smaller ones, and cut to size at the end. */
    Py_ssize_t capacity = (stop - first) / 16 + 16;
    for (Py_ssize_t i = 0; i < 3 + n_columns; i++) {
        out[i] = new_column(capacity, 8, (void **)&columns[i]);
        if (!out[i])
            goto done;
    }
    {
        Py_ssize_t pos = first;
        int64_t values[MAX_WANTED];
        while (pos < stop && buf[pos] == EVENT_RECORD_TAG) {
            if (kept == capacity) {
                capacity *= 2;
                for (Py_ssize_t i = 0; i < 3 + n_columns; i++) {
                    if (PyByteArray_Resize(out[i], capacity * 8) < 0)
                        goto done;
                    columns[i] = (int64_t *)PyByteArray_AS_STRING(out[i]);
                }
            }
            Py_ssize_t batch_end = kept + (capacity - kept);
            Py_BEGIN_ALLOW_THREADS
            /* Decode events until the columns are full or the run ends. */
            while (kept < batch_end && pos < stop && buf[pos] == EVENT_RECORD_TAG) {
                pos += 1;
                uint64_t length;
                error = read_varint(buf, &pos, stop, &length);
                if (error)
                    break;
                if (length > (uint64_t)(stop - pos)) {
                    error = fail("an event record runs past the end of its line (truncated file?)", pos);
                    break;
                }
                Py_ssize_t record_end = pos + (Py_ssize_t)length;
                int64_t metadata_id = 0, offset_ps = 0, duration_ps = 0;
                for (Py_ssize_t c = 0; c < n_columns; c++)
                    values[c] = MISSING;
                while (pos < record_end) {
                    uint64_t number, value = 0;
                    int wire;
                    Py_ssize_t payload = 0;
                    error = read_field(buf, &pos, record_end, &number, &wire, &value, &payload);
                    if (error)
                        break;
                    if (number == 4 && wire == WIRE_LEN) {
                        if (n_wanted == 0)
                            continue;
                        uint64_t id;
                        int64_t v = 0;
                        int is_int;
                        error =
                            stat_int(buf, payload, payload + (Py_ssize_t)value, &id, &v, &is_int);
                        if (error)
                            break;
                        if (!is_int)
                            continue;
                        for (Py_ssize_t w = 0; w < n_wanted; w++) {
                            if ((uint64_t)wanted_ids[w] == id) {
                                values[wanted_cols[w]] = v;
                                break;
                            }
                        }
                    } else if (wire == WIRE_VARINT) {
                        if (number == 1)
                            metadata_id = (int64_t)value;
                        else if (number == 2)
                            offset_ps = (int64_t)value;
                        else if (number == 3)
                            duration_ps = (int64_t)value;
                    }
                }
                if (error)
                    break;
                n_events += 1;
                if (keep >= 0 && values[keep] == MISSING)
                    continue;
                columns[0][kept] = metadata_id;
                columns[1][kept] = offset_ps;
                columns[2][kept] = duration_ps;
                for (Py_ssize_t c = 0; c < n_columns; c++)
                    columns[3 + c][kept] = values[c];
                kept += 1;
            }
            Py_END_ALLOW_THREADS
            if (error) {
                raise_at(error);
                goto done;
            }
        }
        run_end = pos;
    }
    if (kept < capacity) {
        for (Py_ssize_t i = 0; i < 3 + n_columns; i++) {
            if (PyByteArray_Resize(out[i], kept * 8) < 0)
                goto done;
        }
    }
    result = PyTuple_New(4 + n_columns);
    if (!result)
        goto done;
    PyTuple_SET_ITEM(result, 0, PyLong_FromSsize_t(run_end));
    for (Py_ssize_t i = 0; i < 3 + n_columns; i++) {
        PyTuple_SET_ITEM(result, 1 + i, out[i]);
        out[i] = NULL;
    }
done:
    for (Py_ssize_t i = 0; i < 3 + MAX_WANTED; i++)
        Py_XDECREF(out[i]);
    PyBuffer_Release(&view);
    PyBuffer_Release(&ids_view);
    PyBuffer_Release(&cols_view);
    return result;
}

/* extent(data, first, stop) -> (run_end, n_events, first_offset_ps, last_end_ps): where the
 * run of event records at `first` ends, how many events it holds, the smallest offset_ps and
 * the largest offset_ps + duration_ps, without keeping any event. */
static PyObject *extent(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t first, stop;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &first, &stop))
        return NULL;
    PyObject *result = NULL;
    if (first < 0 || stop > view.len || first > stop) {
        PyErr_SetString(PyExc_ValueError, "line span outside the buffer");
        goto done;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t pos = first, events = 0;
    int64_t lowest = INT64_MAX, highest = INT64_MIN;
    failure error = NULL;
    Py_BEGIN_ALLOW_THREADS
    while (pos < stop && buf[pos] == EVENT_RECORD_TAG && !error) {
        pos += 1;
        uint64_t length;
        error = read_varint(buf, &pos, stop, &length);
        if (error)
            break;
        if (length > (uint64_t)(stop - pos)) {
            error = fail("an event record runs past the end of its line (truncated file?)", pos);
            break;
        }
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        int64_t offset_ps = 0, duration_ps = 0;
        while (pos < record_end) {
            uint64_t number, value = 0;
            int wire;
            Py_ssize_t payload = 0;
            error = read_field(buf, &pos, record_end, &number, &wire, &value, &payload);
            if (error)
                break;
            if (wire == WIRE_VARINT && number == 2)
                offset_ps = (int64_t)value;
            else if (wire == WIRE_VARINT && number == 3)
                duration_ps = (int64_t)value;
        }
        /* Wrapping (unsigned) addition: a hostile file must not make this undefined. */
        int64_t end_ps = (int64_t)((uint64_t)offset_ps + (uint64_t)duration_ps);
        if (offset_ps < lowest)
            lowest = offset_ps;
        if (end_ps > highest)
            highest = end_ps;
        events += 1;
    }
    Py_END_ALLOW_THREADS
    if (error) {
        raise_at(error);
        goto done;
    }
    result = Py_BuildValue("nnLL", pos, events, (long long)lowest, (long long)highest);
done:
    PyBuffer_Release(&view);
    return result;
}

/* scan_fields(data, start, stop) -> (number, wire, field_start, value_start, value_stop):
 * the fields of one message as int64 columns (length-delimited values: their payload span;
 * others: where the value starts and ends). A plane has thousands of metadata entries, so
 * walking its fields in Python is what this spares. */
static PyObject *scan_fields(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &stop))
        return NULL;
    PyObject *result = NULL;
    PyObject *out[5] = {NULL};
    int64_t *columns[5] = {NULL};
    const uint8_t *buf = (const uint8_t *)view.buf;
    failure error = NULL;
    Py_ssize_t n = 0;
    if (start < 0 || stop > view.len || start > stop) {
        PyErr_SetString(PyExc_ValueError, "message span outside the buffer");
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int i = 0; i < 5; i++) {
                out[i] = new_column(n, 8, (void **)&columns[i]);
                if (!out[i])
                    goto done;
            }
        }
        Py_ssize_t pos = start, k = 0;
        Py_BEGIN_ALLOW_THREADS
        while (pos < stop) {
            Py_ssize_t field_start = pos, value_start;
            uint64_t number, value = 0;
            int wire;
            Py_ssize_t payload = 0;
            error = read_field(buf, &pos, stop, &number, &wire, &value, &payload);
            if (error)
                break;
            value_start = wire == WIRE_LEN ? payload : field_start;
            if (pass == 1) {
                columns[0][k] = (int64_t)number;
                columns[1][k] = wire;
                columns[2][k] = field_start;
                columns[3][k] = value_start;
                columns[4][k] = pos;
            }
            k += 1;
        }
        Py_END_ALLOW_THREADS
        if (error) {
            raise_at(error);
            goto done;
        }
        n = k;
    }
    result = Py_BuildValue("OOOOO", out[0], out[1], out[2], out[3], out[4]);
done:
    for (int i = 0; i < 5; i++)
        Py_XDECREF(out[i]);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"event_records", event_records, METH_VARARGS,
     "event_records(data, first, stop) -> (run_end, metadata_id, offset_ps, duration_ps, "
     "stat_owner, stat_start, stat_stop): the run of event records at `first`, as int64 columns."},
    {"scan_fields", scan_fields, METH_VARARGS,
     "scan_fields(data, start, stop) -> (number, wire, field_start, value_start, value_stop)."},
    {"extent", extent, METH_VARARGS,
     "extent(data, first, stop) -> (run_end, n_events, first_offset_ps, last_end_ps)."},
    {"skip_records", skip_records, METH_VARARGS,
     "skip_records(data, first, stop) -> (run_end, n_events): the extent of a run of event "
     "records."},
    {"events", events, METH_VARARGS,
     "events(data, first, stop, wanted_ids, wanted_columns, n_columns, keep_column) -> "
     "(run_end, metadata_id, offset_ps, duration_ps, *columns): a run of event records with "
     "chosen integer stats as int64 columns (INT64_MIN where absent)."},
    {"stats", stats, METH_VARARGS,
     "stats(data, starts, stops) -> (metadata_id, kind, int_value, double_value, text_start, "
     "text_stop): XStat payloads decoded into columns."},
    {"kind_runs", kind_runs, METH_VARARGS,
     "kind_runs(starts, ends, kinds, n_kinds) -> None (ops overlap) or [(starts, ends)] per "
     "kind and for all ops: touching ops joined, empty ones left out."},
    {"dense_groups", dense_groups, METH_VARARGS,
     "dense_groups(keys, size) -> (group of each row, first row of each group): int64 keys "
     "in [0, size), groups in order of first appearance."},
    {"group_sums", group_sums, METH_VARARGS,
     "group_sums(groups, group_itemsize, values, n_groups) -> int64 sums per group (None when a "
     "group is outside [0, n_groups))."},
    {"texts", texts, METH_VARARGS,
     "texts(data, starts, stops) -> list of str: the spans decoded as UTF-8, bad bytes "
     "replaced."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire_native", "The XSpace decoder's hot loop in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__wire_native(void) { return PyModule_Create(&module); }
