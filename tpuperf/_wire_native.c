/*
 * The hot loop of the XSpace decoder, in C: walk a line's event records and
 * their stats, writing their fields into flat int64 columns.
 *
 * The C side of tpuperf.kernels, reached only through tpuperf/kernels/_c.py.
 * Each function has a numpy twin of the same name (tpuperf/kernels/_numpy.py)
 * used where this module is not built; tests/test_kernels.py checks every pair
 * on generated and malformed inputs, tests/test_xspace.py both against protobuf.
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
#include <math.h>
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

/* One field of a message: its number, wire type, value (a varint, the bits of a fixed64, or
 * the length of a length-delimited payload) and where the value starts (the payload of a
 * length-delimited field, else the byte after the tag). */
typedef struct {
    uint64_t number;
    int wire;
    uint64_t value;
    Py_ssize_t start;
} field;

/* Read the field at *pos into *f; leaves *pos after it. */
static inline failure read_field(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, field *f)
{
    uint64_t tag;
    Py_ssize_t field_start = *pos;
    failure error = read_varint(buf, pos, end, &tag);
    if (error)
        return error;
    f->number = tag >> 3;
    f->wire = (int)(tag & 7);
    f->value = 0;
    f->start = *pos;
    if (f->number == 0) /* the offset of a bad field is where it starts, as numpy says it */
        return fail("field number 0 (not an XSpace protobuf)", field_start);
    switch (f->wire) {
    case WIRE_VARINT:
        return read_varint(buf, pos, end, &f->value);
    case WIRE_FIXED64:
        if (end - *pos < 8)
            return fail("a fixed64 value runs past the end of its message (truncated file?)", *pos);
        memcpy(&f->value, buf + *pos, 8); /* little-endian on every platform tpuperf targets */
        *pos += 8;
        return NULL;
    case WIRE_LEN:
        error = read_varint(buf, pos, end, &f->value);
        if (error)
            return error;
        if (f->value > (uint64_t)(end - *pos))
            return fail("a field runs past the end of its message (truncated file?)", *pos);
        f->start = *pos;
        *pos += (Py_ssize_t)f->value;
        return NULL;
    case WIRE_FIXED32:
        if (end - *pos < 4)
            return fail("a fixed32 value runs past the end of its message (truncated file?)", *pos);
        *pos += 4;
        return NULL;
    default:
        return fail("invalid wire type (not an XSpace protobuf)", *pos);
    }
}

/* Whether an event record (XLine.events, tag 0x22) starts at pos: a run of them goes on. */
static inline int at_record(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t stop)
{
    return pos < stop && buf[pos] == EVENT_RECORD_TAG;
}

/* Enter the event record at *pos (at_record): leaves *pos at its payload and sets *end to
 * where the record ends. */
static inline failure enter_record(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t stop,
                                   Py_ssize_t *end)
{
    uint64_t length;
    *pos += 1;
    failure error = read_varint(buf, pos, stop, &length);
    if (error)
        return error;
    if (length > (uint64_t)(stop - *pos))
        return fail("an event record runs past the end of its line (truncated file?)", *pos);
    *end = *pos + (Py_ssize_t)length;
    return NULL;
}

/* ------------------------------------------------------------------ arguments and results */

/* (data, first, stop): a buffer and a span of it. 0 with an exception set (and nothing held)
 * when they do not parse or the span lies outside the buffer. */
static int parse_span(PyObject *args, Py_buffer *view, Py_ssize_t *first, Py_ssize_t *stop,
                      const char *what)
{
    if (!PyArg_ParseTuple(args, "y*nn", view, first, stop))
        return 0;
    if (*first < 0 || *stop > view->len || *first > *stop) {
        PyErr_Format(PyExc_ValueError, "%s span outside the buffer", what);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static void release_buffers(Py_buffer *views, int count)
{
    for (int i = 0; i < count; i++)
        PyBuffer_Release(&views[i]);
}

/* (data, starts, stops): a buffer and int64 columns of n spans in it. 0 with an exception
 * set (and nothing held) when they do not parse or differ in length. */
static int parse_spans(PyObject *args, Py_buffer views[3], Py_ssize_t *n)
{
    if (!PyArg_ParseTuple(args, "y*y*y*", &views[0], &views[1], &views[2]))
        return 0;
    if (views[2].len != views[1].len) {
        PyErr_SetString(PyExc_ValueError, "starts and stops differ in length");
        release_buffers(views, 3);
        return 0;
    }
    *n = views[1].len / 8;
    return 1;
}

/* A column of n items as a bytearray (for numpy.frombuffer); *data points at its bytes. */
static PyObject *new_column(Py_ssize_t n, Py_ssize_t item_size, void **data)
{
    PyObject *column = PyByteArray_FromStringAndSize(NULL, n * item_size);
    if (column)
        *data = PyByteArray_AS_STRING(column);
    return column;
}

/* count int64 columns of n rows into out[] and data[]; 0 with an exception set (what was
 * made stays in out[], for drop_columns). */
static int new_columns(PyObject **out, int64_t **data, int count, Py_ssize_t n)
{
    for (int i = 0; i < count; i++) {
        out[i] = new_column(n, 8, (void **)&data[i]);
        if (!out[i])
            return 0;
    }
    return 1;
}

static void drop_columns(PyObject **out, int count)
{
    for (int i = 0; i < count; i++)
        Py_CLEAR(out[i]);
}

/* After a loop run without the GIL: raise its failure, if any. Returns whether it failed. */
static int raised(failure error)
{
    if (!error)
        return 0;
    raise_at(error);
    return 1;
}

/* ------------------------------------------------------------------ event records */

/* The columns of a run of event records, as event_records returns them. */
enum { METADATA_ID, OFFSET_PS, DURATION_PS, STAT_OWNER, STAT_START, STAT_STOP, N_EVENT_COLUMNS };

/* Walk the run of event records starting at `first`. With columns == NULL only count events
 * and stats; otherwise fill the columns. */
static failure walk_events(const uint8_t *buf, Py_ssize_t first, Py_ssize_t stop,
                           int64_t **columns, Py_ssize_t *n_events, Py_ssize_t *n_stats,
                           Py_ssize_t *run_end)
{
    Py_ssize_t pos = first, events = 0, stats = 0, record_end;
    while (at_record(buf, pos, stop)) {
        failure error = enter_record(buf, &pos, stop, &record_end);
        if (error)
            return error;
        if (columns) {
            columns[METADATA_ID][events] = 0;
            columns[OFFSET_PS][events] = 0;
            columns[DURATION_PS][events] = 0;
        }
        while (pos < record_end) {
            field f;
            error = read_field(buf, &pos, record_end, &f);
            if (error)
                return error;
            if (f.number == 4 && f.wire == WIRE_LEN) {
                if (columns) {
                    columns[STAT_OWNER][stats] = events;
                    columns[STAT_START][stats] = f.start;
                    columns[STAT_STOP][stats] = f.start + (Py_ssize_t)f.value;
                }
                stats += 1;
            } else if (columns && f.wire == WIRE_VARINT && f.number >= 1 && f.number <= 3) {
                columns[METADATA_ID + f.number - 1][events] = (int64_t)f.value;
            }
        }
        events += 1;
    }
    *n_events = events;
    *n_stats = stats;
    *run_end = pos;
    return NULL;
}

/* event_records(data, first, stop) -> (run_end, metadata_id, offset_ps, duration_ps,
 *                                      stat_owner, stat_start, stat_stop) */
static PyObject *event_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t first, stop;
    if (!parse_span(args, &view, &first, &stop, "line"))
        return NULL;
    PyObject *result = NULL;
    PyObject *out[N_EVENT_COLUMNS] = {NULL};
    int64_t *columns[N_EVENT_COLUMNS];
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t n_events, n_stats, run_end;
    failure error;
    Py_BEGIN_ALLOW_THREADS
    error = walk_events(buf, first, stop, NULL, &n_events, &n_stats, &run_end);
    Py_END_ALLOW_THREADS
    if (raised(error) || !new_columns(out, columns, STAT_OWNER, n_events) ||
        !new_columns(out + STAT_OWNER, columns + STAT_OWNER, N_EVENT_COLUMNS - STAT_OWNER,
                     n_stats))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    error = walk_events(buf, first, stop, columns, &n_events, &n_stats, &run_end);
    Py_END_ALLOW_THREADS
    if (raised(error))
        goto done;
    result = Py_BuildValue("nOOOOOO", run_end, out[0], out[1], out[2], out[3], out[4], out[5]);
done:
    drop_columns(out, N_EVENT_COLUMNS);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ stats */

/* The stat columns, as stats() returns them. */
enum { STAT_ID, STAT_KIND, STAT_INT, STAT_DOUBLE_VALUE, STAT_TEXT_START, STAT_TEXT_STOP, N_STAT_COLUMNS };

/* stats(data, starts, stops) -> (metadata_id, kind, int_value, double_value, text_start,
 * text_stop); starts and stops are int64 buffers of XStat payload spans. */
static PyObject *stats(PyObject *self, PyObject *args)
{
    Py_buffer views[3];
    Py_ssize_t n;
    if (!parse_spans(args, views, &n))
        return NULL;
    PyObject *result = NULL;
    PyObject *out[N_STAT_COLUMNS] = {NULL};
    void *columns[N_STAT_COLUMNS];
    for (int i = 0; i < N_STAT_COLUMNS; i++) {
        out[i] = new_column(n, i == STAT_KIND ? 1 : 8, &columns[i]);
        if (!out[i])
            goto done;
    }
    int64_t *metadata_id = columns[STAT_ID], *int_value = columns[STAT_INT];
    int64_t *text_start = columns[STAT_TEXT_START], *text_stop = columns[STAT_TEXT_STOP];
    double *double_value = columns[STAT_DOUBLE_VALUE];
    uint8_t *kind = columns[STAT_KIND];
    const uint8_t *buf = (const uint8_t *)views[0].buf;
    const int64_t *starts = (const int64_t *)views[1].buf;
    const int64_t *stops = (const int64_t *)views[2].buf;
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
        if (pos < 0 || end > views[0].len || pos > end) {
            error = fail("a stat lies outside the buffer", pos);
            break;
        }
        while (pos < end) {
            field f;
            error = read_field(buf, &pos, end, &f);
            if (error)
                break;
            if (f.number == 1 && f.wire == WIRE_VARINT) {
                metadata_id[i] = (int64_t)f.value;
            } else if (f.number == 2 && f.wire == WIRE_FIXED64) {
                kind[i] = STAT_DOUBLE;
                memcpy(&double_value[i], &f.value, 8);
            } else if ((f.number == 3 || f.number == 4 || f.number == 7) && f.wire == WIRE_VARINT) {
                kind[i] = f.number == 3 ? STAT_UINT64 : f.number == 4 ? STAT_INT64 : STAT_REF;
                int_value[i] = (int64_t)f.value;
            } else if ((f.number == 5 || f.number == 6) && f.wire == WIRE_LEN) {
                kind[i] = f.number == 5 ? STAT_STR : STAT_BYTES;
                text_start[i] = f.start;
                text_stop[i] = f.start + (Py_ssize_t)f.value;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (raised(error))
        goto done;
    result = Py_BuildValue("OOOOOO", out[0], out[1], out[2], out[3], out[4], out[5]);
done:
    drop_columns(out, N_STAT_COLUMNS);
    release_buffers(views, 3);
    return result;
}

/* ------------------------------------------------------------------ interval sets, groups */

/* kind_runs(starts, ends, kinds, n_kinds) -> None, or a list of n_kinds + 1 (starts, ends)
 * pairs of int64 columns: the intervals of a line of ops sorted by start that neither nest
 * nor overlap, joined where they touch, for each kind (0 .. n_kinds - 1; -1 is none) and last
 * for all ops. Empty ops (end <= start) are left out; None when two ops overlap. The interval
 * sets of a TPU device: one pass instead of a dozen numpy ones per set. */
static PyObject *kind_runs(PyObject *self, PyObject *args)
{
    Py_buffer views[3];
    int n_kinds;
    if (!PyArg_ParseTuple(args, "y*y*y*i", &views[0], &views[1], &views[2], &n_kinds))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = views[0].len / 8;
    const int64_t *starts = (const int64_t *)views[0].buf;
    const int64_t *ends = (const int64_t *)views[1].buf;
    const int8_t *kinds = (const int8_t *)views[2].buf;
    if (views[1].len != views[0].len || views[2].len != n || n_kinds < 0 || n_kinds > 100) {
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
    release_buffers(views, 3);
    return result;
}

/* apart(starts, ends) -> bool: whether every interval [starts[i], ends[i]) is non-empty and
 * starts after the one before it ends (int64 columns of one length). Such a line of ops is
 * its own interval set (no op to join or leave out): kind_runs would copy it whole to say
 * so. One pass, nothing made. */
static PyObject *apart(PyObject *self, PyObject *args)
{
    Py_buffer views[2];
    if (!PyArg_ParseTuple(args, "y*y*", &views[0], &views[1]))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = views[0].len / 8;
    const int64_t *starts = (const int64_t *)views[0].buf;
    const int64_t *ends = (const int64_t *)views[1].buf;
    if (views[1].len != views[0].len) {
        PyErr_SetString(PyExc_ValueError, "apart: columns of different lengths");
        goto done;
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && ok; i++)
        ok = ends[i] > starts[i] && (i == 0 || starts[i] > ends[i - 1]);
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(ok);
done:
    release_buffers(views, 2);
    return result;
}

/* union_length(starts, ends) -> int, or None: the length of the union of the intervals
 * [start, end) of several runs (tuples of int64 columns, starts[r] and ends[r] of one length;
 * empty intervals add nothing), each run in order of start (a line of ops); None when a run
 * is out of order, or there are more than MAX_RUNS. The runs are merged as they are read, each
 * interval in turn the one of earliest start among the runs' next ones, and each adds its part
 * past the furthest end before it (all the intervals before it start no later: what covers its
 * start covers a span from it). One pass and nothing made, where a sort of all the starts and
 * a gather of both columns took seconds at tens of millions (a chip's op lines, XProf's duty
 * cycle). The sum wraps as numpy's integer sums do. */
enum { MAX_RUNS = 64 };

static PyObject *union_length(PyObject *self, PyObject *args)
{
    PyObject *starts_tuple, *ends_tuple, *result = NULL;
    Py_buffer views[2 * MAX_RUNS];
    int held = 0;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &starts_tuple, &PyTuple_Type, &ends_tuple))
        return NULL;
    Py_ssize_t runs = PyTuple_GET_SIZE(starts_tuple);
    if (runs != PyTuple_GET_SIZE(ends_tuple)) {
        PyErr_SetString(PyExc_ValueError, "union_length: as many runs of ends as of starts");
        return NULL;
    }
    if (runs > MAX_RUNS)
        Py_RETURN_NONE;
    const int64_t *starts[MAX_RUNS], *ends[MAX_RUNS];
    Py_ssize_t next[MAX_RUNS], stop[MAX_RUNS];
    int64_t head[MAX_RUNS]; /* each run's next start; INT64_MAX once it has none left */
    for (Py_ssize_t r = 0; r < runs; r++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(starts_tuple, r), &views[held], PyBUF_SIMPLE) < 0)
            goto done;
        held++;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(ends_tuple, r), &views[held], PyBUF_SIMPLE) < 0)
            goto done;
        held++;
        if (views[held - 2].len != views[held - 1].len || views[held - 1].len % 8) {
            PyErr_SetString(PyExc_ValueError, "union_length: a run's starts and ends differ");
            goto done;
        }
        starts[r] = views[held - 2].buf;
        ends[r] = views[held - 1].buf;
        next[r] = 0;
        stop[r] = views[held - 1].len / 8;
        head[r] = stop[r] ? starts[r][0] : INT64_MAX;
    }
    uint64_t total = 0;
    int64_t reach = 0;
    int any = 0, out_of_order = 0;
    Py_BEGIN_ALLOW_THREADS
    while (runs) {
        /* the run of earliest next start, without a branch per run (the lowest of equals) */
        Py_ssize_t from = 0;
        int64_t best = head[0];
        for (Py_ssize_t r = 1; r < runs; r++) {
            int take = head[r] < best;
            best = take ? head[r] : best;
            from = take ? r : from;
        }
        if (next[from] >= stop[from]) { /* heads all INT64_MAX: a run with some left, if any */
            for (from = 0; from < runs && next[from] >= stop[from]; from++)
                ;
            if (from == runs)
                break;
        }
        Py_ssize_t i = next[from]++;
        int64_t start = starts[from][i], end = ends[from][i];
        head[from] = next[from] < stop[from] ? starts[from][next[from]] : INT64_MAX;
        if (head[from] < start) {
            out_of_order = 1;
            break;
        }
        if (end <= start)
            continue;
        if (!any || end > reach) {
            int64_t from_ps = any && reach > start ? reach : start;
            total += (uint64_t)end - (uint64_t)from_ps;
            reach = end;
            any = 1;
        }
    }
    Py_END_ALLOW_THREADS
    if (out_of_order) {
        result = Py_None;
        Py_INCREF(result);
    } else
        result = PyLong_FromLongLong((long long)total);
done:
    release_buffers(views, held);
    return result;
}

/* search_sorted(a, v, right) -> int64 column: np.searchsorted(a, v, side) of sorted int64 a
 * (side "right" where right, else "left"), each search galloping out from where the one
 * before ended. Windows' edges against a device's intervals come in runs in time order, a
 * few hundred intervals apart: a dozen reads near the last answer each, where a binary
 * search from scratch makes twenty across the whole column, most of them cache misses. */
static PyObject *search_sorted(PyObject *self, PyObject *args)
{
    Py_buffer views[2];
    int right;
    if (!PyArg_ParseTuple(args, "y*y*p", &views[0], &views[1], &right))
        return NULL;
    Py_ssize_t n = views[0].len / 8, m = views[1].len / 8;
    const int64_t *a = (const int64_t *)views[0].buf;
    const int64_t *v = (const int64_t *)views[1].buf;
    int64_t *out;
    PyObject *column = new_column(m, 8, (void **)&out);
    if (!column)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t h = 0; /* the last answer */
    for (Py_ssize_t i = 0; i < m; i++) {
        int64_t x = v[i];
        /* before(j): a[j] comes before x's place; true for j < answer, false from it on */
#define BEFORE(j) (right ? a[j] <= x : a[j] < x)
        Py_ssize_t lo, hi;
        if (h < n && BEFORE(h)) { /* the answer lies above h: gallop up */
            lo = h + 1;
            hi = n;
            for (Py_ssize_t step = 1; h + step < n; step <<= 1) {
                if (!BEFORE(h + step)) {
                    hi = h + step;
                    break;
                }
                lo = h + step + 1;
            }
        } else { /* at or below h: gallop down */
            lo = 0;
            hi = h;
            for (Py_ssize_t step = 1; step <= h; step <<= 1) {
                if (BEFORE(h - step)) {
                    lo = h - step + 1;
                    break;
                }
                hi = h - step;
            }
        }
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (BEFORE(mid))
                lo = mid + 1;
            else
                hi = mid;
        }
#undef BEFORE
        out[i] = h = lo;
    }
    Py_END_ALLOW_THREADS
done:
    release_buffers(views, 2);
    return column;
}

/* gap_sums(starts, ends, cuts, short_ps) -> (length, count) int64 columns, one value per cut:
 * of the gaps between neighbouring intervals (gap k = starts[k + 1] - ends[k]) with k < cut,
 * those shorter than short_ps, their summed length (wrapping as int64 sums do) and their
 * count. cuts are sorted, each in [0, n - 1]. What running sums of the short gaps read at
 * the cuts give, in one pass that makes no column of gaps. */
static PyObject *gap_sums(PyObject *self, PyObject *args)
{
    Py_buffer views[3];
    long long short_ps;
    if (!PyArg_ParseTuple(args, "y*y*y*L", &views[0], &views[1], &views[2], &short_ps))
        return NULL;
    PyObject *result = NULL, *length = NULL, *count = NULL;
    Py_ssize_t n = views[0].len / 8, n_cuts = views[2].len / 8;
    const int64_t *starts = (const int64_t *)views[0].buf;
    const int64_t *ends = (const int64_t *)views[1].buf;
    const int64_t *cuts = (const int64_t *)views[2].buf;
    int bad = views[1].len != views[0].len;
    for (Py_ssize_t j = 0; j < n_cuts && !bad; j++)
        bad = cuts[j] < 0 || cuts[j] > (n > 0 ? n - 1 : 0) || (j > 0 && cuts[j] < cuts[j - 1]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "gap_sums: cuts out of order or out of range");
        goto done;
    }
    uint64_t *length_out, *count_out;
    length = new_column(n_cuts, 8, (void **)&length_out);
    count = new_column(n_cuts, 8, (void **)&count_out);
    if (!length || !count)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    uint64_t total = 0, shorts = 0; /* unsigned: wraps without undefined behaviour */
    Py_ssize_t k = 0;
    for (Py_ssize_t j = 0; j < n_cuts; j++) {
        for (; k < cuts[j]; k++) {
            int64_t gap = (int64_t)((uint64_t)starts[k + 1] - (uint64_t)ends[k]);
            if (gap < short_ps) {
                total += (uint64_t)gap;
                shorts++;
            }
        }
        length_out[j] = total;
        count_out[j] = shorts;
    }
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, length, count);
done:
    Py_XDECREF(length);
    Py_XDECREF(count);
    release_buffers(views, 3);
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

/* The group (code, key) of row i of a column of int32 or int64 groups (itemsize 4 or 8):
 * a TPU op's metadata row is int32, one an op. */
static inline int64_t group_at(const void *groups, int itemsize, Py_ssize_t i)
{
    return itemsize == 4 ? (int64_t)((const int32_t *)groups)[i] : ((const int64_t *)groups)[i];
}

/* `column`, or None (the column dropped) where a key was outside its range: what the group
 * kernels answer for groups they cannot number. */
static PyObject *column_unless(PyObject *column, int outside)
{
    if (!outside)
        return column;
    Py_DECREF(column);
    Py_RETURN_NONE;
}

/* Whether a code of codes[from:n] (int32 or int64) lies outside [0, n_codes). */
static int codes_outside(const void *codes, int itemsize, Py_ssize_t from, Py_ssize_t n,
                         Py_ssize_t n_codes)
{
    int outside = 0;
    if (itemsize == 4) {
        const int32_t *c = (const int32_t *)codes;
        for (Py_ssize_t i = from; i < n; i++)
            outside |= (c[i] < 0) | ((int64_t)c[i] >= n_codes);
    } else {
        const int64_t *c = (const int64_t *)codes;
        for (Py_ssize_t i = from; i < n; i++)
            outside |= (c[i] < 0) | (c[i] >= n_codes);
    }
    return outside;
}

/* One pass over int32 or int64 codes (itemsize 4 or 8: a TPU op's metadata row, one an op)
 * filling an int64 column of n_codes values, or None when a code lies outside [0, n_codes):
 * how many rows hold each code (counting, np.bincount with minlength n_codes, which first
 * copies int32 codes into int64 ones as long), else the first row holding each code,
 * len(codes) for a code no row has (numpy scatters a reversed arange as long as the codes). */
static PyObject *per_code(PyObject *args, int counting)
{
    Py_buffer view;
    int itemsize;
    Py_ssize_t n_codes;
    if (!PyArg_ParseTuple(args, "y*in", &view, &itemsize, &n_codes))
        return NULL;
    PyObject *result = NULL;
    if ((itemsize != 4 && itemsize != 8) || view.len % itemsize || n_codes < 0) {
        PyErr_SetString(PyExc_ValueError, counting ? "counts: int32 or int64 codes"
                                                   : "first_rows: int32 or int64 codes");
        goto done;
    }
    Py_ssize_t n = view.len / itemsize;
    int64_t *out;
    PyObject *column = new_column(n_codes, 8, (void **)&out);
    if (!column)
        goto done;
    int outside = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n_codes; k++)
        out[k] = counting ? 0 : n;
    Py_ssize_t unseen = n_codes, i = 0;
    for (; i < n && (counting || unseen); i++) {
        int64_t code = group_at(view.buf, itemsize, i);
        if (code < 0 || code >= n_codes) {
            outside = 1;
            break;
        }
        if (counting)
            out[code]++;
        else if (out[code] == n) {
            out[code] = i;
            unseen--;
        }
    }
    /* First rows: once every code has its first row (a step's ops, as a rule, of a capture of
     * many), the rest are only checked to be codes, in a loop the compiler vectorizes. */
    if (!outside && i < n)
        outside = codes_outside(view.buf, itemsize, i, n, n_codes);
    Py_END_ALLOW_THREADS
    result = column_unless(column, outside);
done:
    PyBuffer_Release(&view);
    return result;
}

/* first_rows(codes, itemsize, n_codes) -> the first row of each code (per_code) */
static PyObject *first_rows(PyObject *self, PyObject *args)
{
    return per_code(args, 0);
}

/* counts(codes, itemsize, n_codes) -> how many rows hold each code (per_code) */
static PyObject *counts(PyObject *self, PyObject *args)
{
    return per_code(args, 1);
}

/* group_sums(groups, group_itemsize, values, n_groups[, into]) -> int64 column of n_groups
 * sums, or None when a group lies outside [0, n_groups). groups are int32 or int64
 * (group_itemsize 4 or 8), values int64; sums wrap as int64 arithmetic does (numpy's add.at
 * gives the same). With `into` (a writable buffer of n_groups int64), the values are added to
 * its sums, in place, and `into` is given back; nothing is added when a group is outside (the
 * groups are all checked first). A diff adds each device's ops to one ops x steps array so. */
static PyObject *group_sums(PyObject *self, PyObject *args)
{
    Py_buffer groups_view, values_view, into_view = {0};
    int itemsize;
    Py_ssize_t n_groups;
    if (!PyArg_ParseTuple(args, "y*iy*n|w*", &groups_view, &itemsize, &values_view, &n_groups,
                          &into_view))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = values_view.len / 8;
    if ((itemsize != 4 && itemsize != 8) || groups_view.len != n * itemsize || n_groups < 0) {
        PyErr_SetString(PyExc_ValueError, "group_sums: groups and values differ in length");
        goto done;
    }
    if (into_view.obj && into_view.len != n_groups * 8) {
        PyErr_SetString(PyExc_ValueError, "group_sums: into holds n_groups int64 sums");
        goto done;
    }
    uint64_t *sums;
    PyObject *column;
    if (into_view.obj) {
        if (codes_outside(groups_view.buf, itemsize, 0, n, n_groups)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        sums = into_view.buf;
        column = into_view.obj;
        Py_INCREF(column);
    } else {
        column = new_column(n_groups, 8, (void **)&sums);
        if (!column)
            goto done;
    }
    const int64_t *values = (const int64_t *)values_view.buf;
    int outside = 0;
    Py_BEGIN_ALLOW_THREADS
    if (!into_view.obj)
        memset(sums, 0, (size_t)n_groups * 8);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t g = group_at(groups_view.buf, itemsize, i);
        if (g < 0 || g >= n_groups) {
            outside = 1;
            break;
        }
        sums[g] += (uint64_t)values[i]; /* unsigned: wraps without undefined behaviour */
    }
    Py_END_ALLOW_THREADS
    result = column_unless(column, outside);
done:
    PyBuffer_Release(&groups_view);
    PyBuffer_Release(&values_view);
    if (into_view.obj)
        PyBuffer_Release(&into_view);
    return result;
}

/* roofline_sums(keys, itemsize, size, dur, flops, nbytes, ideal) -> (first, dur_sum,
 * flops_sum, bytes_sum, lost_sum) or None when a key lies outside [0, size): ops grouped by
 * key (int32 or int64, itemsize 4 or 8: a TPU op's metadata row), groups numbered in order
 * of first appearance (as dense_groups), with each group's first row, its int64 durations
 * summed (wrapping), and summed op by op in row order as doubles (what np.bincount with
 * weights adds, to the last bit): its key's flops and nbytes, and max(dur - ideal, 0), the
 * time lost against the roofline (flops, nbytes and ideal: float64, one per key). One pass
 * where numpy makes a dozen over every leaf op, each with a temporary as long. */
static PyObject *roofline_sums(PyObject *self, PyObject *args)
{
    Py_buffer views[5];
    int itemsize;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y*iny*y*y*y*", &views[0], &itemsize, &size, &views[1], &views[2],
                          &views[3], &views[4]))
        return NULL;
    PyObject *result = NULL, *out[5] = {NULL, NULL, NULL, NULL, NULL};
    int64_t *code_of = NULL, *first = NULL;
    uint64_t *dur_sum = NULL;
    double *flops_sum = NULL, *bytes_sum = NULL, *lost_sum = NULL;
    Py_ssize_t n = itemsize > 0 ? views[0].len / itemsize : 0;
    if ((itemsize != 4 && itemsize != 8) || views[0].len != n * itemsize || size < 0 ||
        views[1].len != n * 8 || views[2].len != size * 8 || views[3].len != size * 8 ||
        views[4].len != size * 8) {
        PyErr_SetString(PyExc_ValueError, "roofline_sums: a key and duration per op, a value "
                                          "of each column per key");
        goto done;
    }
    const int64_t *dur = (const int64_t *)views[1].buf;
    const double *flops = (const double *)views[2].buf, *nbytes = (const double *)views[3].buf;
    const double *ideal = (const double *)views[4].buf;
    size_t slots = (size_t)(size > 0 ? size : 1);
    code_of = PyMem_Malloc(slots * sizeof(int64_t));
    first = PyMem_Malloc(slots * sizeof(int64_t));
    dur_sum = PyMem_Calloc(slots, sizeof(uint64_t));
    flops_sum = PyMem_Calloc(slots, sizeof(double));
    bytes_sum = PyMem_Calloc(slots, sizeof(double));
    lost_sum = PyMem_Calloc(slots, sizeof(double));
    if (!code_of || !first || !dur_sum || !flops_sum || !bytes_sum || !lost_sum) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t groups = 0;
    int outside = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < size; k++)
        code_of[k] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t key = group_at(views[0].buf, itemsize, i);
        if (key < 0 || key >= size) {
            outside = 1;
            break;
        }
        int64_t g = code_of[key];
        if (g < 0) {
            g = code_of[key] = groups;
            first[groups++] = i;
        }
        dur_sum[g] += (uint64_t)dur[i]; /* unsigned: wraps without undefined behaviour */
        flops_sum[g] += flops[key];
        bytes_sum[g] += nbytes[key];
        double lost = (double)dur[i] - ideal[key];
        lost_sum[g] += lost < 0 ? 0.0 : lost; /* np.clip(lost, 0, None): NaN stays NaN */
    }
    Py_END_ALLOW_THREADS
    if (outside) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    const void *sources[5] = {first, dur_sum, flops_sum, bytes_sum, lost_sum};
    for (int c = 0; c < 5; c++) {
        void *data;
        out[c] = new_column(groups, 8, &data);
        if (!out[c])
            goto done;
        memcpy(data, sources[c], (size_t)groups * 8);
    }
    result = PyTuple_Pack(5, out[0], out[1], out[2], out[3], out[4]);
done:
    for (int c = 0; c < 5; c++)
        Py_XDECREF(out[c]);
    PyMem_Free(code_of);
    PyMem_Free(first);
    PyMem_Free(dur_sum);
    PyMem_Free(flops_sum);
    PyMem_Free(bytes_sum);
    PyMem_Free(lost_sum);
    release_buffers(views, 5);
    return result;
}

enum { MAX_TOTAL_COLUMNS = 8 };

/* The columns of the tuple `values`, n 8-byte items each, into views[]; *held counts the
 * views to release (also on failure). 0 with an exception set when one is not a buffer of n
 * items or there are more than MAX_TOTAL_COLUMNS. */
static int get_columns(PyObject *values, Py_ssize_t n, Py_buffer *views, int *held,
                       const char *what)
{
    if (PyTuple_GET_SIZE(values) > MAX_TOTAL_COLUMNS) {
        PyErr_Format(PyExc_ValueError, "%s: 8 columns at most", what);
        return 0;
    }
    for (*held = 0; *held < PyTuple_GET_SIZE(values); *held += 1) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(values, *held), &views[*held], PyBUF_SIMPLE) < 0)
            return 0;
        if (views[*held].len != n * 8) {
            *held += 1;
            PyErr_Format(PyExc_ValueError, "%s: groups and values differ in length", what);
            return 0;
        }
    }
    return 1;
}

/* group_totals(groups, group_itemsize, values, n_groups) -> (first, counts, sums) or None
 * when a group lies outside [0, n_groups): per group its first row (the number of rows for
 * a group no row has), its number of rows and the sum of each int64 column of the tuple
 * `values` (wrapping as group_sums does). What first_rows, bincount and one group_sums a
 * column give, in one pass over the rows instead of one pass each. */
static PyObject *group_totals(PyObject *self, PyObject *args)
{
    Py_buffer groups_view, views[MAX_TOTAL_COLUMNS];
    int itemsize, n_columns = 0;
    PyObject *values, *result = NULL;
    PyObject *first_column = NULL, *count_column = NULL, *sum_columns[MAX_TOTAL_COLUMNS] = {0};
    Py_ssize_t n_groups;
    if (!PyArg_ParseTuple(args, "y*iO!n", &groups_view, &itemsize, &PyTuple_Type, &values,
                          &n_groups))
        return NULL;
    Py_ssize_t n = groups_view.len / (itemsize == 4 ? 4 : 8);
    if ((itemsize != 4 && itemsize != 8) || n_groups < 0) {
        PyErr_SetString(PyExc_ValueError, "group_totals: int32 or int64 groups");
        goto done;
    }
    if (!get_columns(values, n, views, &n_columns, "group_totals"))
        goto done;
    int64_t *first, *counts;
    uint64_t *sums[MAX_TOTAL_COLUMNS];
    first_column = new_column(n_groups, 8, (void **)&first);
    count_column = new_column(n_groups, 8, (void **)&counts);
    if (!first_column || !count_column)
        goto done;
    for (int c = 0; c < n_columns; c++) {
        sum_columns[c] = new_column(n_groups, 8, (void **)&sums[c]);
        if (!sum_columns[c])
            goto done;
    }
    int outside = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t g = 0; g < n_groups; g++)
        first[g] = n;
    memset(counts, 0, (size_t)n_groups * 8);
    for (int c = 0; c < n_columns; c++)
        memset(sums[c], 0, (size_t)n_groups * 8);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t g = group_at(groups_view.buf, itemsize, i);
        if (g < 0 || g >= n_groups) {
            outside = 1;
            break;
        }
        if (!counts[g]++)
            first[g] = i;
        for (int c = 0; c < n_columns; c++)
            sums[c][g] += (uint64_t)((const int64_t *)views[c].buf)[i]; /* wraps, defined */
    }
    Py_END_ALLOW_THREADS
    if (outside) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *sum_tuple = PyTuple_New(n_columns);
    if (!sum_tuple)
        goto done;
    for (int c = 0; c < n_columns; c++) {
        PyTuple_SET_ITEM(sum_tuple, c, sum_columns[c]);
        sum_columns[c] = NULL;
    }
    result = Py_BuildValue("(OON)", first_column, count_column, sum_tuple);
done:
    Py_XDECREF(first_column);
    Py_XDECREF(count_column);
    for (int c = 0; c < MAX_TOTAL_COLUMNS; c++)
        Py_XDECREF(sum_columns[c]);
    release_buffers(views, n_columns);
    PyBuffer_Release(&groups_view);
    return result;
}

/* group_nansums(groups, group_itemsize, values, n_groups, index, index_itemsize) ->
 * [(sums, counts)] for each float64 column of the tuple `values`, or None when a group lies
 * outside [0, n_groups) or an index outside the groups: per group the sum of its values that
 * are not NaN, added in row order from 0.0, and how many there are. Row i is entry index[i]
 * of groups and values (a Lookup's index: values per metadata row read through it, without
 * making them a column), or entry i where index is None. The same doubles, to the bit, as
 * numpy's bincount(groups[present], weights=values[present]) and bincount(groups[present])
 * (pandas' sum(min_count=1) is the sum where the count is not 0), in one pass over the rows
 * for every column instead of a mask, gathers and two bincounts each. */
static PyObject *group_nansums(PyObject *self, PyObject *args)
{
    Py_buffer groups_view, index_view = {0}, views[MAX_TOTAL_COLUMNS];
    int itemsize, index_itemsize, n_columns = 0;
    PyObject *values, *index_object, *result = NULL;
    PyObject *sum_columns[MAX_TOTAL_COLUMNS] = {0}, *count_columns[MAX_TOTAL_COLUMNS] = {0};
    Py_ssize_t n_groups;
    if (!PyArg_ParseTuple(args, "y*iO!nOi", &groups_view, &itemsize, &PyTuple_Type, &values,
                          &n_groups, &index_object, &index_itemsize))
        return NULL;
    Py_ssize_t n_entries = groups_view.len / (itemsize == 4 ? 4 : 8), n = n_entries;
    int indexed = index_object != Py_None;
    if ((itemsize != 4 && itemsize != 8) || n_groups < 0 ||
        (indexed && index_itemsize != 4 && index_itemsize != 8)) {
        PyErr_SetString(PyExc_ValueError, "group_nansums: int32 or int64 groups and index");
        goto done;
    }
    if (indexed) {
        if (PyObject_GetBuffer(index_object, &index_view, PyBUF_SIMPLE) < 0)
            goto done;
        n = index_view.len / index_itemsize;
    }
    if (!get_columns(values, n_entries, views, &n_columns, "group_nansums"))
        goto done;
    double *sums[MAX_TOTAL_COLUMNS];
    int64_t *counts[MAX_TOTAL_COLUMNS];
    for (int c = 0; c < n_columns; c++) {
        sum_columns[c] = new_column(n_groups, 8, (void **)&sums[c]);
        count_columns[c] = new_column(n_groups, 8, (void **)&counts[c]);
        if (!sum_columns[c] || !count_columns[c])
            goto done;
    }
    int outside = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int c = 0; c < n_columns; c++) {
        for (Py_ssize_t g = 0; g < n_groups; g++)
            sums[c][g] = 0.0;
        memset(counts[c], 0, (size_t)n_groups * 8);
    }
    for (Py_ssize_t i = 0; i < n && !outside; i++) {
        int64_t entry = indexed ? group_at(index_view.buf, index_itemsize, i) : i;
        if (entry < 0 || entry >= n_entries) {
            outside = 1;
            break;
        }
        int64_t g = group_at(groups_view.buf, itemsize, entry);
        if (g < 0 || g >= n_groups) {
            outside = 1;
            break;
        }
        for (int c = 0; c < n_columns; c++) {
            double x = ((const double *)views[c].buf)[entry];
            if (x == x) { /* not NaN */
                sums[c][g] += x;
                counts[c][g] += 1;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (outside) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = PyList_New(n_columns);
    for (int c = 0; result && c < n_columns; c++) {
        PyObject *pair = PyTuple_Pack(2, sum_columns[c], count_columns[c]);
        if (!pair) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, c, pair);
    }
done:
    for (int c = 0; c < MAX_TOTAL_COLUMNS; c++) {
        Py_XDECREF(sum_columns[c]);
        Py_XDECREF(count_columns[c]);
    }
    release_buffers(views, n_columns);
    if (index_view.obj)
        PyBuffer_Release(&index_view);
    PyBuffer_Release(&groups_view);
    return result;
}

/* A value and the step it was taken at: what the selection and sort below move. */
typedef struct {
    double value;
    Py_ssize_t step;
} ranked_value;

/* Where a selection or sort of ranked values starts its generator of pivot positions: the same
 * for every row, so that the same values are moved the same way. */
#define PIVOT_SEED 0x9E3779B97F4A7C15u
/* Partitions of one span after which it is sorted whole by qsort (never quadratic). */
#define MAX_ROUNDS 64

static void swap_ranked(ranked_value *a, Py_ssize_t i, Py_ssize_t j)
{
    ranked_value t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static int compare_ranked(const void *a, const void *b)
{
    double x = ((const ranked_value *)a)->value, y = ((const ranked_value *)b)->value;
    return (x > y) - (x < y);
}

/* Hoare's partition of a[0:n] (n > 16, no NaN) about the median of three values at positions
 * a generator draws, moved first (a pattern in the values, as a diff's per-step times have,
 * cannot make it slow, as it made numpy's partition: 92 ms for 1,500 rows of 5,834 steps,
 * 12 ms for random values): returns p with every value of a[0:p] <= every value of a[p:n],
 * and 0 < p < n. Values equal to the pivot stop both scans, so runs of ties split evenly. */
static Py_ssize_t partition_ranked(ranked_value *a, Py_ssize_t n, uint64_t *state)
{
    Py_ssize_t picks[3];
    for (int p = 0; p < 3; p++) {
        *state ^= *state << 13; /* xorshift64 */
        *state ^= *state >> 7;
        *state ^= *state << 17;
        picks[p] = (Py_ssize_t)(*state % (uint64_t)n);
    }
    double x = a[picks[0]].value, y = a[picks[1]].value, z = a[picks[2]].value;
    double pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
    swap_ranked(a, 0, x == pivot ? picks[0] : y == pivot ? picks[1] : picks[2]);
    Py_ssize_t i = -1, j = n;
    for (;;) {
        do
            j--;
        while (a[j].value > pivot);
        do
            i++;
        while (a[i].value < pivot);
        if (i >= j)
            return j + 1;
        swap_ranked(a, i, j);
    }
}

/* a[0:n] (no NaN) in order of value, ties in any order: quicksort (the shorter side by
 * recursion: depth at most log2(n)), insertion sort for short runs, qsort for a span still
 * long after MAX_ROUNDS partitions (qsort's call per comparison was most of a large diff's
 * bootstrap medians, as the only sort). */
static void sort_ranked(ranked_value *a, Py_ssize_t n, uint64_t *state)
{
    for (int round = 0; n > 16; round++) {
        if (round == MAX_ROUNDS) {
            qsort(a, (size_t)n, sizeof *a, compare_ranked);
            return;
        }
        Py_ssize_t p = partition_ranked(a, n, state);
        if (p < n - p) {
            sort_ranked(a, p, state);
            a += p;
            n -= p;
        } else {
            sort_ranked(a + p, n - p, state);
            n = p;
        }
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        ranked_value v = a[i];
        Py_ssize_t j = i;
        for (; j > 0 && a[j - 1].value > v.value; j--)
            a[j] = a[j - 1];
        a[j] = v;
    }
}

/* The k smallest values of a[0:n] (no NaN, 0 < k < n) moved to a[0:k], in any order; the span
 * left sorted whole once short, or after MAX_ROUNDS partitions. */
static void select_ranked(ranked_value *a, Py_ssize_t n, Py_ssize_t k, uint64_t *state)
{
    for (int round = 0; n > 16 && round < MAX_ROUNDS; round++) {
        Py_ssize_t p = partition_ranked(a, n, state);
        if (p == k)
            return;
        if (p < k) {
            a += p;
            n -= p;
            k -= p;
        } else
            n = p;
    }
    sort_ranked(a, n, state);
}

/* Make a[from:] sorted at least up to a[upto - 1] (from < upto <= n; a[0:from] sorted and no
 * greater than any later value; no NaN): the next `upto - from` smallest values selected,
 * then sorted. A row's walk takes its values in order only until every replicate is past
 * the middle: a few times sqrt(steps) values, not the row. Returns upto. */
static Py_ssize_t sort_prefix(ranked_value *a, Py_ssize_t from, Py_ssize_t upto, Py_ssize_t n,
                              uint64_t *state)
{
    if (upto < n)
        select_ranked(a + from, n - from, upto - from, state);
    sort_ranked(a + from, upto - from, state);
    return upto;
}

/* rank_values(samples, n, ranks) -> bytearray of rows x len(ranks) doubles: each row's
 * values at `ranks` (int64, ascending, each in [0, n)) of its values in order, NaN after
 * every number, as numpy's partition puts them; 0.0 + the value (-0.0 is 0.0: the two
 * zeros tie, and which of them a partition leaves at a rank is its own affair). */
static PyObject *rank_values(PyObject *self, PyObject *args)
{
    Py_buffer samples_view, ranks_view;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*ny*", &samples_view, &n, &ranks_view))
        return NULL;
    PyObject *result = NULL;
    ranked_value *row = NULL;
    Py_ssize_t n_ranks = ranks_view.len / 8;
    const int64_t *ranks = ranks_view.buf;
    int bad = n < 1 || samples_view.len % (8 * n) || ranks_view.len % 8;
    for (Py_ssize_t q = 0; q < n_ranks && !bad; q++)
        bad = ranks[q] < 0 || ranks[q] >= n || (q && ranks[q] < ranks[q - 1]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError,
                        "rank_values: rows of n values, ascending ranks in [0, n)");
        goto done;
    }
    Py_ssize_t rows = samples_view.len / 8 / n;
    double *out;
    PyObject *column = new_column(rows * n_ranks, 8, (void **)&out);
    if (!column)
        goto done;
    row = PyMem_Malloc((size_t)n * sizeof *row);
    if (!row) {
        Py_DECREF(column);
        PyErr_NoMemory();
        goto done;
    }
    const double *samples = samples_view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) {
        Py_ssize_t valid = 0;
        for (Py_ssize_t j = 0; j < n; j++) { /* the numbers first, NaN left out */
            double v = samples[i * n + j];
            if (v == v) {
                row[valid].value = v;
                row[valid++].step = j;
            }
        }
        uint64_t state = PIVOT_SEED;
        Py_ssize_t from = 0;
        for (Py_ssize_t q = 0; q < n_ranks; q++) {
            Py_ssize_t k = (Py_ssize_t)ranks[q];
            if (k >= valid) {
                out[i * n_ranks + q] = NAN;
                continue;
            }
            if (k >= from) { /* values before `from` are settled: no greater than the rest */
                /* the k + 1 - from smallest of the rest first, the largest of them at k */
                if (k + 1 < valid)
                    select_ranked(row + from, valid - from, k + 1 - from, &state);
                Py_ssize_t top = from;
                for (Py_ssize_t j = from + 1; j <= k; j++)
                    if (row[j].value > row[top].value)
                        top = j;
                swap_ranked(row, top, k);
                from = k + 1;
            }
            out[i * n_ranks + q] = 0.0 + row[k].value;
        }
    }
    Py_END_ALLOW_THREADS
    result = column;
done:
    PyMem_Free(row);
    PyBuffer_Release(&samples_view);
    PyBuffer_Release(&ranks_view);
    return result;
}

/* bootstrap_medians(samples, n_steps, counts) -> bytearray of rows x replicates doubles, or
 * None when a replicate does not draw n_steps steps: for each row of `samples` (float64, rows x
 * n_steps: one value per step) and each replicate of `counts` (int64, replicates x n_steps: how
 * many times the replicate drew each step), the median of the values drawn, as numpy's median
 * of them gives it: the middle value, or the two middle ones added and halved (a sum from
 * 0.0, as numpy's mean: -0.0 is 0.0); NaN where a NaN was drawn. numpy gathers every
 * replicate's draws and partitions them (rows x replicates x n_steps values: 30 s for a diff
 * of 3,000 ops over 233 steps). Here each row is sorted once, and its values are taken in
 * order, every replicate at once, adding each replicate's draws of the value until all have
 * drawn more than half: the median of a replicate is the value at which its draws pass the
 * middle rank.
 *
 * bootstrap_medians(samples, n_steps, counts, floors, drawn_below, drawn_through) starts each
 * row at its floor (float64 per row; NaN: from the smallest value), given each replicate's
 * draws of the values up to it and below it (int32, rows x replicates; a row of draws below
 * that starts with -1 is counted here), which the caller counts for all rows at once as
 * products of matrices. Only the values above the floor are sorted and taken in order; a
 * replicate whose draws pass a middle rank at the floor has the floor there (many steps of an
 * op take the same time to the picosecond: often more than half). A row where a replicate's
 * draws below the floor already pass the middle rank starts from its smallest value, as
 * without a floor: the floor changes the work, never the medians. */
static PyObject *bootstrap_medians(PyObject *self, PyObject *args)
{
    Py_buffer samples_view, counts_view, floors_view = {0}, below_view = {0}, through_view = {0};
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*ny*|y*y*y*", &samples_view, &n, &counts_view, &floors_view,
                          &below_view, &through_view))
        return NULL;
    PyObject *column = NULL, *result = NULL;
    ranked_value *sorted = NULL;
    Py_ssize_t *at_floor = NULL;
    int32_t *by_step = NULL, *drawn = NULL, *below = NULL, *above = NULL;
    if (n < 1 || n > INT32_MAX / 2 || samples_view.len % (8 * n) || counts_view.len % (8 * n)) {
        PyErr_SetString(PyExc_ValueError, "bootstrap_medians: rows and replicates of n_steps");
        goto done;
    }
    Py_ssize_t rows = samples_view.len / 8 / n, replicates = counts_view.len / 8 / n;
    const double *floors = floors_view.obj ? floors_view.buf : NULL;
    const int32_t *drawn_below = below_view.obj ? below_view.buf : NULL;
    const int32_t *drawn_through = through_view.obj ? through_view.buf : NULL;
    if ((floors || drawn_below || drawn_through) &&
        (!floors || !drawn_below || !drawn_through || floors_view.len != rows * 8 ||
         below_view.len != rows * replicates * 4 || through_view.len != rows * replicates * 4)) {
        PyErr_SetString(PyExc_ValueError, "bootstrap_medians: a floor per row and int32 draws "
                                          "below it and up to it per replicate");
        goto done;
    }
    double *out = NULL;
    column = new_column(rows * replicates, 8, (void **)&out);
    sorted = PyMem_Malloc((size_t)n * sizeof *sorted);
    at_floor = PyMem_Malloc((size_t)n * sizeof *at_floor); /* steps below, and at, the floor */
    /* the counts step by step (each step's draws in every replicate: one row read per value),
     * and per replicate its draws so far and how many values it has taken below each of the
     * middle ranks (the position of the value at that rank) */
    by_step = PyMem_Malloc((size_t)(n * replicates + 1) * sizeof *by_step);
    drawn = PyMem_Malloc((size_t)(replicates + 1) * sizeof *drawn);
    below = PyMem_Malloc((size_t)(replicates + 1) * sizeof *below);
    above = PyMem_Malloc((size_t)(replicates + 1) * sizeof *above);
    if (!column || !sorted || !at_floor || !by_step || !drawn || !below || !above) {
        if (column)
            PyErr_NoMemory();
        goto done;
    }
    const double *samples = samples_view.buf;
    const int64_t *counts = counts_view.buf;
    int short_draw = 0;
    /* The ranks of the middle draws (0: the smallest): one for an odd count, two for even. */
    int32_t low = (int32_t)((n - 1) / 2), high = (int32_t)(n / 2);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < replicates && !short_draw; r++) {
        int64_t total = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            int64_t c = counts[r * n + j];
            if (c < 0 || c > n)
                short_draw = 1;
            total += c;
            by_step[j * replicates + r] = (int32_t)c;
        }
        if (total != n)
            short_draw = 1;
    }
    for (Py_ssize_t i = 0; i < rows && !short_draw; i++) {
        /* From the floor, where no replicate's draws below it pass the middle. The values below
         * it (ranks 0 to skipped - 1) and those equal to it (the next `level` ranks) are not
         * sorted: each replicate's draws of them all are given (through), and of those below
         * it (or -1: added here, from the fewer of the two kinds). */
        double floor = floors ? floors[i] : NAN;
        const int32_t *through = floors ? drawn_through + i * replicates : NULL;
        Py_ssize_t skipped = 0, level = 0, m = 0;
        if (floor == floor) {
            for (Py_ssize_t j = 0; j < n; j++) {
                double value = samples[i * n + j];
                if (value < floor)
                    at_floor[skipped++] = j;
                else if (value == floor)
                    at_floor[n - ++level] = j;
                else {
                    sorted[m].value = value;
                    sorted[m].step = j;
                    m++;
                }
            }
            const int32_t *given = drawn_below + i * replicates;
            int from_below = skipped <= level;
            const Py_ssize_t *steps = from_below ? at_floor : at_floor + n - level;
            Py_ssize_t k = given[0] >= 0 ? 0 : from_below ? skipped : level;
            for (Py_ssize_t r = 0; r < replicates; r++)
                drawn[r] = given[0] >= 0 ? given[r] : from_below ? 0 : through[r];
            for (Py_ssize_t q = 0; q < k; q++) {
                const int32_t *count = by_step + steps[q] * replicates;
                for (Py_ssize_t r = 0; r < replicates; r++)
                    drawn[r] += from_below ? count[r] : -count[r];
            }
            int from_floor = 1;
            for (Py_ssize_t r = 0; r < replicates; r++)
                from_floor &= drawn[r] >= 0 && drawn[r] <= low && through[r] >= drawn[r];
            if (!from_floor)
                skipped = level = m = 0;
        }
        if (!skipped && !level && m != n) { /* from the smallest value */
            for (Py_ssize_t j = 0; j < n; j++) {
                sorted[j].value = samples[i * n + j];
                sorted[j].step = j;
            }
            m = n;
        }
        /* NaN last, as numpy sorts (their draws make a replicate's median NaN, below); the
         * others sorted as far as the walk takes them, a block of a few sqrt(steps) at a time */
        Py_ssize_t valid = m;
        for (Py_ssize_t p = 0; p < valid;) {
            if (sorted[p].value != sorted[p].value)
                swap_ranked(sorted, p, --valid);
            else
                p++;
        }
        Py_ssize_t in_order = 0, block = 8 * (Py_ssize_t)ceil(sqrt((double)n)) + 16;
        uint64_t state = PIVOT_SEED;
        /* A replicate whose draws pass a middle rank among the values equal to the floor has
         * the floor there: its position is the first of them. */
        int all_past = 1;
        for (Py_ssize_t r = 0; r < replicates; r++) {
            int32_t now = skipped + level ? through[r] : 0;
            drawn[r] = now;
            below[r] = (int32_t)(skipped + (now <= low ? level : 0));
            above[r] = (int32_t)(skipped + (now <= high ? level : 0));
            all_past &= now > high;
        }
        for (Py_ssize_t p = 0; p < valid && !all_past; p++) {
            if (p == in_order) {
                in_order = sort_prefix(sorted, in_order, Py_MIN(valid, in_order + block), valid,
                                       &state);
                block *= 2;
            }
            const int32_t *count = by_step + sorted[p].step * replicates;
            all_past = 1;
            for (Py_ssize_t r = 0; r < replicates; r++) { /* vectorised by the compiler */
                int32_t now = drawn[r] + count[r];
                drawn[r] = now;
                below[r] += now <= low;
                above[r] += now <= high;
                all_past &= now > high;
            }
        }
        /* numpy's median is the mean of the middle values, a sum from 0.0 (so -0.0 is 0.0);
         * the value at rank k is the floor's level, or sorted[k - skipped - level] above it */
        double *median = out + i * replicates;
        Py_ssize_t first_sorted = skipped + level;
        for (Py_ssize_t r = 0; r < replicates; r++) {
            if (drawn[r] <= high) { /* (a replicate that drew NaN: set below) */
                median[r] = NAN;
                continue;
            }
            double at_low = below[r] < first_sorted ? floor : sorted[below[r] - first_sorted].value;
            double at_high = above[r] < first_sorted ? floor : sorted[above[r] - first_sorted].value;
            median[r] = high == low ? 0.0 + at_low : (0.0 + at_low + at_high) / 2.0;
        }
        for (Py_ssize_t p = valid; p < m; p++) { /* NaN drawn: NaN */
            const int32_t *count = by_step + sorted[p].step * replicates;
            for (Py_ssize_t r = 0; r < replicates; r++)
                if (count[r])
                    median[r] = NAN;
        }
    }
    Py_END_ALLOW_THREADS
    if (short_draw) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = column;
    column = NULL;
done:
    Py_XDECREF(column);
    PyMem_Free(sorted);
    PyMem_Free(at_floor);
    PyMem_Free(by_step);
    PyMem_Free(drawn);
    PyMem_Free(below);
    PyMem_Free(above);
    PyBuffer_Release(&samples_view);
    PyBuffer_Release(&counts_view);
    if (floors_view.obj)
        PyBuffer_Release(&floors_view);
    if (below_view.obj)
        PyBuffer_Release(&below_view);
    if (through_view.obj)
        PyBuffer_Release(&through_view);
    return result;
}

/* texts(data, starts, stops) -> list of str: each span of `data` decoded as UTF-8 (bad bytes
 * replaced); starts and stops are int64 buffers. Metadata names, tens of thousands a plane. */
static PyObject *texts(PyObject *self, PyObject *args)
{
    Py_buffer views[3];
    Py_ssize_t n;
    if (!parse_spans(args, views, &n))
        return NULL;
    const int64_t *starts = (const int64_t *)views[1].buf;
    const int64_t *stops = (const int64_t *)views[2].buf;
    PyObject *result = PyList_New(n);
    if (!result)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (starts[i] < 0 || stops[i] > views[0].len || starts[i] > stops[i]) {
            Py_CLEAR(result);
            PyErr_Format(PyExc_ValueError, "a string lies outside the buffer, at byte %lld",
                         (long long)starts[i]);
            goto done;
        }
        PyObject *text = PyUnicode_DecodeUTF8((const char *)views[0].buf + starts[i],
                                              (Py_ssize_t)(stops[i] - starts[i]), "replace");
        if (!text) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, text);
    }
done:
    release_buffers(views, 3);
    return result;
}

/* factorize(values) -> (codes, unique): each value's code (int32) in the distinct values
 * (a tuple, in order of first appearance), equal values found as a dict finds them; what
 * a Python loop of dict.setdefault gives, without a bytecode step per value (a TPU plane's
 * name columns: thousands of values each, seven columns a chip). */
static PyObject *factorize(PyObject *self, PyObject *args)
{
    PyObject *values;
    if (!PyArg_ParseTuple(args, "O", &values))
        return NULL;
    PyObject *seq = PySequence_Fast(values, "factorize: values must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *result = NULL, *unique_tuple = NULL;
    PyObject *seen = PyDict_New(), *unique = PyList_New(0);
    int32_t *codes = NULL;
    PyObject *out = seen && unique ? new_column(n, 4, (void **)&codes) : NULL;
    if (!out)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *code = PyDict_GetItemWithError(seen, items[i]); /* borrowed */
        if (code) {
            codes[i] = (int32_t)PyLong_AsLong(code);
            continue;
        }
        if (PyErr_Occurred())
            goto done; /* an unhashable value, as setdefault raises it */
        Py_ssize_t k = PyList_GET_SIZE(unique);
        if (k > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "factorize: more distinct values than int32");
            goto done;
        }
        code = PyLong_FromSsize_t(k);
        int failed = !code || PyDict_SetItem(seen, items[i], code) < 0 ||
                     PyList_Append(unique, items[i]) < 0;
        Py_XDECREF(code);
        if (failed)
            goto done;
        codes[i] = (int32_t)k;
    }
    unique_tuple = PyList_AsTuple(unique);
    if (unique_tuple)
        result = PyTuple_Pack(2, out, unique_tuple);
done:
    Py_XDECREF(unique_tuple);
    Py_XDECREF(out);
    Py_XDECREF(unique);
    Py_XDECREF(seen);
    Py_DECREF(seq);
    return result;
}

/* ------------------------------------------------------------------ runs of records */

/* skip_records(data, first, stop) -> (run_end, n_events): the extent of the run of event
 * records at `first`, without decoding them. */
static PyObject *skip_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t first, stop;
    if (!parse_span(args, &view, &first, &stop, "line"))
        return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t pos = first, events = 0;
    failure error = NULL;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t record_end;
    while (at_record(buf, pos, stop)) {
        error = enter_record(buf, &pos, stop, &record_end);
        if (error)
            break;
        pos = record_end;
        events += 1;
    }
    Py_END_ALLOW_THREADS
    PyObject *result = raised(error) ? NULL : Py_BuildValue("nn", pos, events);
    PyBuffer_Release(&view);
    return result;
}

/* The id and value of one XStat payload; *is_int says whether its value is an integer
 * (int64, uint64 or ref): its last value field, as stats() reads the kind. */
static failure stat_int(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, uint64_t *id,
                        int64_t *value, int *is_int)
{
    *is_int = 0;
    *id = 0;
    while (pos < end) {
        field f;
        failure error = read_field(buf, &pos, end, &f);
        if (error)
            return error;
        if (f.number == 1 && f.wire == WIRE_VARINT) {
            *id = f.value;
        } else if ((f.number == 3 || f.number == 4 || f.number == 7) && f.wire == WIRE_VARINT) {
            *value = (int64_t)f.value;
            *is_int = 1;
        } else if ((f.number == 2 && f.wire == WIRE_FIXED64) ||
                   ((f.number == 5 || f.number == 6) && f.wire == WIRE_LEN)) {
            *is_int = 0; /* a later value field of another kind replaces the integer */
        }
    }
    return NULL;
}

#define MAX_WANTED 16
#define MISSING INT64_MIN

/* events(data, first, stop, wanted_ids, wanted_columns, n_columns, keep_column[, expected])
 *   -> (run_end, metadata_id, offset_ps, duration_ps, column_0, ..., column_{n-1})
 * The run of event records at `first`, with the integer stats whose metadata ids are in
 * `wanted_ids` (int64 buffer) written to output column `wanted_columns[i]` (int64 buffer);
 * an event without a stat gets INT64_MIN there. With keep_column >= 0, only events that have
 * that column's stat are kept. */
static PyObject *events(PyObject *self, PyObject *args)
{
    Py_buffer views[3]; /* data, wanted_ids, wanted_columns */
    Py_ssize_t first, stop, n_columns, keep, expected = 0;
    if (!PyArg_ParseTuple(args, "y*nny*y*nn|n", &views[0], &first, &stop, &views[1], &views[2],
                          &n_columns, &keep, &expected))
        return NULL;
    PyObject *result = NULL;
    PyObject *out[3 + MAX_WANTED] = {NULL};
    int64_t *columns[3 + MAX_WANTED] = {NULL};
    Py_ssize_t n_wanted = views[1].len / 8;
    const int64_t *wanted_ids = (const int64_t *)views[1].buf;
    const int64_t *wanted_cols = (const int64_t *)views[2].buf;
    const uint8_t *buf = (const uint8_t *)views[0].buf;
    failure error = NULL;
    Py_ssize_t run_end = first, kept = 0;
    if (first < 0 || stop > views[0].len || first > stop || n_columns < 0 ||
        n_columns > MAX_WANTED || views[2].len != views[1].len || keep >= n_columns) {
        PyErr_SetString(PyExc_ValueError, "events: bad arguments");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_wanted; i++) {
        if (wanted_cols[i] < 0 || wanted_cols[i] >= n_columns) {
            PyErr_SetString(PyExc_ValueError, "events: a wanted column is out of range");
            goto done;
        }
    }
    /* One pass: columns sized for the events expected where the caller knows how many (no
     * larger block to cut down: its memory is reused, not mapped afresh), else for a typical
     * event (16 bytes or more); grown when a line holds more, and cut to size at the end. */
    Py_ssize_t capacity = expected > 0 ? expected : (stop - first) / 16 + 16;
    if (!new_columns(out, columns, 3 + (int)n_columns, capacity))
        goto done;
    {
        Py_ssize_t pos = first, record_end;
        int64_t values[MAX_WANTED];
        while (at_record(buf, pos, stop)) {
            if (kept == capacity) {
                capacity *= 2;
                for (Py_ssize_t i = 0; i < 3 + n_columns; i++) {
                    if (PyByteArray_Resize(out[i], capacity * 8) < 0)
                        goto done;
                    columns[i] = (int64_t *)PyByteArray_AS_STRING(out[i]);
                }
            }
            Py_BEGIN_ALLOW_THREADS
            /* Decode events until the columns are full or the run ends. */
            while (kept < capacity && at_record(buf, pos, stop)) {
                error = enter_record(buf, &pos, stop, &record_end);
                if (error)
                    break;
                int64_t event[3] = {0, 0, 0}; /* metadata_id, offset_ps, duration_ps */
                for (Py_ssize_t c = 0; c < n_columns; c++)
                    values[c] = MISSING;
                while (pos < record_end) {
                    field f;
                    error = read_field(buf, &pos, record_end, &f);
                    if (error)
                        break;
                    if (f.number == 4 && f.wire == WIRE_LEN) {
                        if (n_wanted == 0)
                            continue;
                        uint64_t id;
                        int64_t v = 0;
                        int is_int;
                        error = stat_int(buf, f.start, f.start + (Py_ssize_t)f.value, &id, &v,
                                         &is_int);
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
                    } else if (f.wire == WIRE_VARINT && f.number >= 1 && f.number <= 3) {
                        event[f.number - 1] = (int64_t)f.value;
                    }
                }
                if (error)
                    break;
                if (keep >= 0 && values[keep] == MISSING)
                    continue;
                for (int c = 0; c < 3; c++)
                    columns[c][kept] = event[c];
                for (Py_ssize_t c = 0; c < n_columns; c++)
                    columns[3 + c][kept] = values[c];
                kept += 1;
            }
            Py_END_ALLOW_THREADS
            if (raised(error))
                goto done;
        }
        run_end = pos;
    }
    for (Py_ssize_t i = 0; kept < capacity && i < 3 + n_columns; i++) {
        if (PyByteArray_Resize(out[i], kept * 8) < 0)
            goto done;
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
    drop_columns(out, 3 + MAX_WANTED);
    release_buffers(views, 3);
    return result;
}

/* extent(data, first, stop) -> (run_end, n_events, first_offset_ps, last_end_ps): where the
 * run of event records at `first` ends, how many events it holds, the smallest offset_ps and
 * the largest offset_ps + duration_ps, without keeping any event. */
static PyObject *extent(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t first, stop;
    if (!parse_span(args, &view, &first, &stop, "line"))
        return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t pos = first, events = 0, record_end;
    int64_t lowest = INT64_MAX, highest = INT64_MIN;
    failure error = NULL;
    Py_BEGIN_ALLOW_THREADS
    while (at_record(buf, pos, stop) && !error) {
        error = enter_record(buf, &pos, stop, &record_end);
        if (error)
            break;
        int64_t offset_ps = 0, duration_ps = 0;
        while (pos < record_end) {
            field f;
            error = read_field(buf, &pos, record_end, &f);
            if (error)
                break;
            if (f.wire == WIRE_VARINT && f.number == 2)
                offset_ps = (int64_t)f.value;
            else if (f.wire == WIRE_VARINT && f.number == 3)
                duration_ps = (int64_t)f.value;
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
    PyObject *result = raised(error) ? NULL
                                     : Py_BuildValue("nnLL", pos, events, (long long)lowest,
                                                     (long long)highest);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ messages */

/* scan_fields(data, start, stop) -> (number, wire, field_start, value_start, value_stop):
 * the fields of one message as int64 columns (length-delimited values: their payload span;
 * others: where the value starts, after the tag, and ends). A plane has thousands of
 * metadata entries, so walking its fields in Python is what this spares. */
static PyObject *scan_fields(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, stop;
    if (!parse_span(args, &view, &start, &stop, "message"))
        return NULL;
    PyObject *result = NULL;
    PyObject *out[5] = {NULL};
    int64_t *columns[5] = {NULL};
    const uint8_t *buf = (const uint8_t *)view.buf;
    failure error = NULL;
    Py_ssize_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && !new_columns(out, columns, 5, n))
            goto done;
        Py_ssize_t pos = start, k = 0;
        Py_BEGIN_ALLOW_THREADS
        while (pos < stop) {
            Py_ssize_t field_start = pos;
            field f;
            error = read_field(buf, &pos, stop, &f);
            if (error)
                break;
            if (pass == 1) {
                columns[0][k] = (int64_t)f.number;
                columns[1][k] = f.wire;
                columns[2][k] = field_start;
                columns[3][k] = f.start;
                columns[4][k] = pos;
            }
            k += 1;
        }
        Py_END_ALLOW_THREADS
        if (raised(error))
            goto done;
        n = k;
    }
    result = Py_BuildValue("OOOOO", out[0], out[1], out[2], out[3], out[4]);
done:
    drop_columns(out, 5);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ many messages */

/* message_fields: the fields of many small messages (metadata entries, stats), in the order
 * and with the errors of the numpy rounds of tpuperf.kernels.wire.message_fields: round r
 * reads the r-th field of every message that has one, so each field key's entries come
 * round by round, in message order within a round; a round's faults are reported in the
 * order numpy meets them (tags, field number 0, values by wire type, then a field past its
 * message's end). Varints and payloads are read against the end of the buffer (as numpy
 * does) and checked against their message's end after the round. */

/* How a varint read against the buffer's end went: read, ran past the end, or too long. */
enum { VARINT_READ, VARINT_PAST, VARINT_LONG };

static inline int varint_at(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t limit,
                            uint64_t *out)
{
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*pos >= limit)
            return VARINT_PAST;
        uint8_t byte = buf[(*pos)++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *out = result;
            return VARINT_READ;
        }
    }
    return VARINT_LONG;
}

static const char out_of_memory[] = "out of memory";

enum { SMALL_TAGS = 1024 };

/* The field keys met (tags: number * 8 + wire), each with the round it first appeared in
 * and its count of entries; found by an open-addressing table of key ids. */
typedef struct {
    uint64_t *tags;
    Py_ssize_t *first_round, *count;
    Py_ssize_t n, capacity;
    Py_ssize_t *slots; /* key id + 1, 0 for an empty slot */
    Py_ssize_t n_slots;
    Py_ssize_t small[SMALL_TAGS]; /* key id + 1 of the tags below SMALL_TAGS, 0 for none */
} key_table;

static void free_keys(key_table *t)
{
    free(t->tags);
    free(t->first_round);
    free(t->count);
    free(t->slots);
}

static inline size_t slot_of(uint64_t tag, Py_ssize_t n_slots)
{
    return (size_t)((tag * 0x9E3779B97F4A7C15ull) >> 20) & (size_t)(n_slots - 1);
}

/* A table's slots (open addressing: item id + 1, 0 for an empty slot) made again, twice as
 * many (64 at first), for its `n` items, each placed at `place(table, item, n_slots)` or the
 * first empty slot after it; 0 out of memory (the slots as they were). */
static int grow_slots(Py_ssize_t **slots, Py_ssize_t *n_slots, Py_ssize_t n,
                      size_t (*place)(const void *, Py_ssize_t, Py_ssize_t), const void *table)
{
    Py_ssize_t size = *n_slots ? *n_slots * 2 : 64;
    Py_ssize_t *grown = calloc((size_t)size, sizeof *grown);
    if (!grown)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t s = place(table, i, size);
        while (grown[s])
            s = (s + 1) & (size_t)(size - 1);
        grown[s] = i + 1;
    }
    free(*slots);
    *slots = grown;
    *n_slots = size;
    return 1;
}

/* `column` (an array) reallocated to `capacity` items; out of memory, the enclosing function
 * returns -1 (the column keeps its size; its table is freed whole by its owner). */
#define GROW_COLUMN_OR_FAIL(column, capacity)                                                  \
    do {                                                                                       \
        void *grown_ = realloc((column), (size_t)(capacity) * sizeof *(column));               \
        if (!grown_)                                                                           \
            return -1;                                                                         \
        (column) = grown_;                                                                     \
    } while (0)

static size_t key_place(const void *table, Py_ssize_t k, Py_ssize_t n_slots)
{
    return slot_of(((const key_table *)table)->tags[k], n_slots);
}

/* The id of key `tag` (added, first met in `round`, where new); -1 out of memory. */
static Py_ssize_t key_id(key_table *t, uint64_t tag, Py_ssize_t round)
{
    if (tag < SMALL_TAGS && t->small[tag]) { /* one- and two-byte tags: a table */
        Py_ssize_t k = t->small[tag] - 1;
        if (round < t->first_round[k])
            t->first_round[k] = round;
        return k;
    }
    if (2 * (t->n + 1) > t->n_slots &&
        !grow_slots(&t->slots, &t->n_slots, t->n, key_place, t))
        return -1;
    size_t s = slot_of(tag, t->n_slots);
    while (t->slots[s]) {
        Py_ssize_t k = t->slots[s] - 1;
        if (t->tags[k] == tag) {
            if (round < t->first_round[k])
                t->first_round[k] = round;
            return k;
        }
        s = (s + 1) & (size_t)(t->n_slots - 1);
    }
    if (t->n == t->capacity) {
        Py_ssize_t capacity = t->capacity ? t->capacity * 2 : 16;
        GROW_COLUMN_OR_FAIL(t->tags, capacity);
        GROW_COLUMN_OR_FAIL(t->first_round, capacity);
        GROW_COLUMN_OR_FAIL(t->count, capacity);
        t->capacity = capacity;
    }
    Py_ssize_t k = t->n++;
    t->tags[k] = tag;
    t->first_round[k] = round;
    t->count[k] = 0;
    t->slots[s] = k + 1;
    if (tag < SMALL_TAGS)
        t->small[tag] = k + 1;
    return k;
}

/* The (key id, round) pairs met, each with its count of fields: a key's fields go out round
 * by round, so each pair gets the place of its first field in the key's columns. */
typedef struct {
    Py_ssize_t *key, *round, *count, *offset;
    Py_ssize_t n, capacity;
    Py_ssize_t *slots; /* pair id + 1, 0 for an empty slot */
    Py_ssize_t n_slots;
} pair_table;

static void free_pairs(pair_table *t)
{
    free(t->key);
    free(t->round);
    free(t->count);
    free(t->offset);
    free(t->slots);
}

static inline size_t pair_slot(Py_ssize_t key, Py_ssize_t round, Py_ssize_t n_slots)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull ^ (uint64_t)round * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h >> 20) & (size_t)(n_slots - 1);
}

static size_t pair_place(const void *table, Py_ssize_t p, Py_ssize_t n_slots)
{
    const pair_table *t = table;
    return pair_slot(t->key[p], t->round[p], n_slots);
}

/* The id of pair (key, round), added where new and `add`; -1 where absent (not `add`) or out
 * of memory. */
static Py_ssize_t pair_id(pair_table *t, Py_ssize_t key, Py_ssize_t round, int add)
{
    if (add && 2 * (t->n + 1) > t->n_slots &&
        !grow_slots(&t->slots, &t->n_slots, t->n, pair_place, t))
        return -1;
    if (!t->n_slots)
        return -1;
    size_t s = pair_slot(key, round, t->n_slots);
    while (t->slots[s]) {
        Py_ssize_t p = t->slots[s] - 1;
        if (t->key[p] == key && t->round[p] == round)
            return p;
        s = (s + 1) & (size_t)(t->n_slots - 1);
    }
    if (!add)
        return -1;
    if (t->n == t->capacity) {
        Py_ssize_t capacity = t->capacity ? t->capacity * 2 : 16;
        GROW_COLUMN_OR_FAIL(t->key, capacity);
        GROW_COLUMN_OR_FAIL(t->round, capacity);
        GROW_COLUMN_OR_FAIL(t->count, capacity);
        GROW_COLUMN_OR_FAIL(t->offset, capacity);
        t->capacity = capacity;
    }
    Py_ssize_t p = t->n++;
    t->key[p] = key;
    t->round[p] = round;
    t->count[p] = 0;
    t->offset[p] = 0;
    t->slots[s] = p + 1;
    return p;
}

/* The kinds of fault, in the order numpy's rounds check for them. */
enum {
    FAULT_TAG_PAST, FAULT_TAG_LONG, FAULT_NUMBER_0,
    FAULT_VARINT_PAST, FAULT_VARINT_LONG, FAULT_FIXED64,
    FAULT_LEN_PAST, FAULT_LEN_LONG, FAULT_LEN_OVER,
    FAULT_WIRE_3, FAULT_WIRE_4, FAULT_WIRE_6, FAULT_WIRE_7,
    FAULT_END, N_FAULTS
};

static const char *const fault_messages[N_FAULTS] = {
    "a varint runs past the end of its message (truncated file?)",
    "a varint is longer than 10 bytes (not an XSpace protobuf)",
    "field number 0 (not an XSpace protobuf)",
    "a varint runs past the end of its message (truncated file?)",
    "a varint is longer than 10 bytes (not an XSpace protobuf)",
    "a fixed64 value runs past the end of its message (truncated file?)",
    "a varint runs past the end of its message (truncated file?)",
    "a varint is longer than 10 bytes (not an XSpace protobuf)",
    "a field runs past the end of its message (truncated file?)",
    "invalid wire type (not an XSpace protobuf)",
    "invalid wire type (not an XSpace protobuf)",
    "invalid wire type (not an XSpace protobuf)",
    "invalid wire type (not an XSpace protobuf)",
    "a field runs past the end of its message (truncated file?)",
};

/* Walk every field of the messages [starts[i], stops[i]), message by message (reading them
 * round by round, as numpy does, jumps across the buffer once per round: as slow in C as in
 * numpy). Without columns (the first pass), count each key's fields per round into the key
 * and pair tables, and find the fault numpy would meet first: the one of the earliest round,
 * then of the first kind in its order of checks, then of the first message (each message's
 * walk stops at its own first fault, and the least one is raised). With columns (the second
 * pass, on bytes the first found sound), write each field at its pair's next place. */
static failure read_messages(const uint8_t *buf, Py_ssize_t limit, const int64_t *starts,
                             const int64_t *stops, Py_ssize_t n, key_table *keys,
                             pair_table *pairs, int64_t **rows, int64_t **values,
                             int64_t **value_stops)
{
    enum { CACHED_ROUNDS = 64 };
    Py_ssize_t cached[CACHED_ROUNDS] = {0}; /* pair id + 1 last met at each early round */
    Py_ssize_t known_keys = keys->n;
    Py_ssize_t fault_round = PY_SSIZE_T_MAX, fault_at = -1;
    int fault_kind = N_FAULTS;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t pos = starts[i], end = stops[i];
        if (pos >= end)
            continue;
        if (pos < 0 || end > limit)
            return fail("message span outside the buffer", -1);
        for (Py_ssize_t round = 0; pos < end && round <= fault_round; round++) {
            Py_ssize_t field_start = pos;
            uint64_t tag, value = 0;
            int kind = N_FAULTS, read;
            Py_ssize_t at = -1;
            read = varint_at(buf, &pos, limit, &tag);
            if (read != VARINT_READ) {
                kind = read == VARINT_PAST ? FAULT_TAG_PAST : FAULT_TAG_LONG;
                at = read == VARINT_PAST ? limit : field_start;
            } else if (tag >> 3 == 0) {
                kind = FAULT_NUMBER_0;
                at = field_start;
            } else {
                Py_ssize_t value_start = pos;
                switch ((int)(tag & 7)) {
                case WIRE_VARINT:
                    read = varint_at(buf, &pos, limit, &value);
                    if (read != VARINT_READ) {
                        kind = read == VARINT_PAST ? FAULT_VARINT_PAST : FAULT_VARINT_LONG;
                        at = read == VARINT_PAST ? limit : value_start;
                    }
                    break;
                case WIRE_FIXED64:
                    if (limit - pos < 8) {
                        kind = FAULT_FIXED64;
                        at = pos;
                        break;
                    }
                    memcpy(&value, buf + pos, 8);
                    pos += 8;
                    break;
                case WIRE_LEN: {
                    uint64_t length;
                    read = varint_at(buf, &pos, limit, &length);
                    if (read != VARINT_READ) {
                        kind = read == VARINT_PAST ? FAULT_LEN_PAST : FAULT_LEN_LONG;
                        at = read == VARINT_PAST ? limit : value_start;
                    } else if (length > (uint64_t)(limit - pos)) {
                        kind = FAULT_LEN_OVER;
                        at = pos;
                    } else {
                        value = (uint64_t)pos;
                        pos += (Py_ssize_t)length;
                    }
                    break;
                }
                case WIRE_FIXED32:
                    pos += 4;
                    break;
                default: {
                    int wire = (int)(tag & 7);
                    kind = wire == 3 ? FAULT_WIRE_3
                         : wire == 4 ? FAULT_WIRE_4
                         : wire == 6 ? FAULT_WIRE_6
                                     : FAULT_WIRE_7;
                    at = pos;
                }
                }
                if (kind == N_FAULTS && pos > end) {
                    kind = FAULT_END;
                    at = field_start;
                }
            }
            if (kind != N_FAULTS) {
                if (round < fault_round || (round == fault_round && kind < fault_kind)) {
                    fault_round = round;
                    fault_kind = kind;
                    fault_at = at;
                }
                break;
            }
            if (fault_kind != N_FAULTS)
                continue; /* nothing is kept past a fault: only faults are looked for */
            Py_ssize_t k = key_id(keys, tag, round);
            if (k < 0)
                return out_of_memory;
            if (rows && k >= known_keys)
                return fail("the buffer changed while it was read", -1);
            Py_ssize_t p = round < CACHED_ROUNDS ? cached[round] - 1 : -1;
            if (p < 0 || pairs->key[p] != k) {
                p = pair_id(pairs, k, round, rows == NULL);
                if (p < 0)
                    return rows ? fail("the buffer changed while it was read", -1)
                                : out_of_memory;
                if (round < CACHED_ROUNDS)
                    cached[round] = p + 1;
            }
            if (!rows) {
                keys->count[k]++;
                pairs->count[p]++;
                continue;
            }
            Py_ssize_t place = pairs->offset[p]++;
            if (place >= keys->count[k])
                return fail("the buffer changed while it was read", -1);
            rows[k][place] = i;
            values[k][place] = (int64_t)value;
            value_stops[k][place] = pos;
        }
    }
    if (fault_kind != N_FAULTS)
        return fail(fault_messages[fault_kind], fault_at);
    return NULL;
}

/* Key ids in the order numpy's dict has them: by first round, then wire type, then number. */
static const key_table *sorting_keys;

static int compare_keys(const void *a, const void *b)
{
    const key_table *t = sorting_keys;
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    if (t->first_round[x] != t->first_round[y])
        return t->first_round[x] < t->first_round[y] ? -1 : 1;
    uint64_t wx = t->tags[x] & 7, wy = t->tags[y] & 7;
    if (wx != wy)
        return wx < wy ? -1 : 1;
    uint64_t nx = t->tags[x] >> 3, ny = t->tags[y] >> 3;
    return nx < ny ? -1 : nx > ny;
}

/* Pair ids by key id, then round. */
static const pair_table *sorting_pairs;

static int compare_pairs(const void *a, const void *b)
{
    const pair_table *t = sorting_pairs;
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    if (t->key[x] != t->key[y])
        return t->key[x] < t->key[y] ? -1 : 1;
    return t->round[x] < t->round[y] ? -1 : t->round[x] > t->round[y];
}

/* message_fields(data, starts, stops) -> [(key, rows, values, value_stops)] */
static PyObject *message_fields(PyObject *self, PyObject *args)
{
    Py_buffer views[3];
    Py_ssize_t n;
    if (!parse_spans(args, views, &n))
        return NULL;
    key_table keys = {0};
    pair_table pairs = {0};
    PyObject *result = NULL;
    Py_ssize_t *order = NULL;
    int64_t **rows = NULL, **values = NULL, **value_stops = NULL;
    const uint8_t *buf = (const uint8_t *)views[0].buf;
    const int64_t *starts = (const int64_t *)views[1].buf, *stops = (const int64_t *)views[2].buf;
    failure error;
    Py_BEGIN_ALLOW_THREADS
    error = read_messages(buf, views[0].len, starts, stops, n, &keys, &pairs, NULL, NULL, NULL);
    Py_END_ALLOW_THREADS
    if (error == out_of_memory) {
        PyErr_NoMemory();
        goto done;
    }
    if (raised(error))
        goto done;
    Py_ssize_t n_keys = keys.n;
    size_t size = (size_t)(n_keys > pairs.n ? n_keys : pairs.n) + 1;
    order = malloc(size * sizeof *order);
    rows = calloc(size, sizeof *rows);
    values = calloc(size, sizeof *values);
    value_stops = calloc(size, sizeof *value_stops);
    result = PyList_New(n_keys);
    if (!order || !rows || !values || !value_stops) {
        PyErr_NoMemory();
        Py_CLEAR(result);
    }
    if (!result)
        goto done;
    /* Each pair's first place in its key's columns: the key's pairs in order of rounds. */
    for (Py_ssize_t p = 0; p < pairs.n; p++)
        order[p] = p;
    sorting_pairs = &pairs; /* under the GIL: one sort at a time */
    qsort(order, (size_t)pairs.n, sizeof *order, compare_pairs);
    for (Py_ssize_t j = 0, placed = 0; j < pairs.n; j++) {
        Py_ssize_t p = order[j];
        if (j && pairs.key[p] != pairs.key[order[j - 1]])
            placed = 0;
        pairs.offset[p] = placed;
        placed += pairs.count[p];
    }
    /* The keys in numpy's order, each with its columns. */
    for (Py_ssize_t k = 0; k < n_keys; k++)
        order[k] = k;
    sorting_keys = &keys;
    qsort(order, (size_t)n_keys, sizeof *order, compare_keys);
    for (Py_ssize_t j = 0; j < n_keys; j++) {
        Py_ssize_t k = order[j];
        PyObject *out[3] = {NULL};
        int64_t *columns[3];
        if (!new_columns(out, columns, 3, keys.count[k])) {
            drop_columns(out, 3);
            Py_CLEAR(result);
            goto done;
        }
        rows[k] = columns[0];
        values[k] = columns[1];
        value_stops[k] = columns[2];
        PyObject *item = Py_BuildValue("KOOO", (unsigned long long)keys.tags[k], out[0], out[1],
                                       out[2]);
        drop_columns(out, 3);
        if (!item) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, j, item); /* the list holds the columns written below */
    }
    Py_BEGIN_ALLOW_THREADS
    error = read_messages(buf, views[0].len, starts, stops, n, &keys, &pairs, rows, values,
                          value_stops);
    Py_END_ALLOW_THREADS
    if (error == out_of_memory) {
        PyErr_NoMemory();
        Py_CLEAR(result);
    } else if (raised(error)) {
        Py_CLEAR(result);
    }
done:
    free(order);
    free(rows);
    free(values);
    free(value_stops);
    free_keys(&keys);
    free_pairs(&pairs);
    release_buffers(views, 3);
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
     "events(data, first, stop, wanted_ids, wanted_columns, n_columns, keep_column[, expected]) "
     "-> "
     "(run_end, metadata_id, offset_ps, duration_ps, *columns): a run of event records with "
     "chosen integer stats as int64 columns (INT64_MIN where absent)."},
    {"message_fields", message_fields, METH_VARARGS,
     "message_fields(data, starts, stops) -> [(key, rows, values, value_stops)]: the fields "
     "of many messages, per key (number * 8 + wire) in the order of numpy's rounds."},
    {"stats", stats, METH_VARARGS,
     "stats(data, starts, stops) -> (metadata_id, kind, int_value, double_value, text_start, "
     "text_stop): XStat payloads decoded into columns."},
    {"kind_runs", kind_runs, METH_VARARGS,
     "kind_runs(starts, ends, kinds, n_kinds) -> None (ops overlap) or [(starts, ends)] per "
     "kind and for all ops: touching ops joined, empty ones left out."},
    {"apart", apart, METH_VARARGS,
     "apart(starts, ends) -> whether every interval is non-empty and starts after the last "
     "ends"},
    {"search_sorted", search_sorted, METH_VARARGS,
     "search_sorted(a, v, right) -> np.searchsorted(a, v, side) of sorted int64 a, galloping "
     "from each answer to the next"},
    {"gap_sums", gap_sums, METH_VARARGS,
     "gap_sums(starts, ends, cuts, short_ps) -> (length, count) of the short gaps before each "
     "cut"},
    {"dense_groups", dense_groups, METH_VARARGS,
     "dense_groups(keys, size) -> (group of each row, first row of each group): int64 keys "
     "in [0, size), groups in order of first appearance."},
    {"first_rows", first_rows, METH_VARARGS,
     "first_rows(codes, itemsize, n_codes) -> the first row of each code (None when a code is "
     "outside [0, n_codes))"},
    {"counts", counts, METH_VARARGS,
     "counts(codes, itemsize, n_codes) -> how many rows hold each code (None when a code is "
     "outside [0, n_codes))"},
    {"group_sums", group_sums, METH_VARARGS,
     "group_sums(groups, group_itemsize, values, n_groups[, into]) -> int64 sums per group, "
     "or into with the values added to its sums (None, nothing added, when a group is outside "
     "[0, n_groups))."},
    {"roofline_sums", roofline_sums, METH_VARARGS,
     "roofline_sums(keys, itemsize, size, dur, flops, nbytes, ideal) -> (first, dur_sum, "
     "flops_sum, bytes_sum, lost_sum) per group of ops by key (None when a key is outside "
     "[0, size))."},
    {"group_totals", group_totals, METH_VARARGS,
     "group_totals(groups, group_itemsize, values, n_groups) -> (first row, rows, sums of each "
     "int64 column) per group (None when a group is outside [0, n_groups))."},
    {"group_nansums", group_nansums, METH_VARARGS,
     "group_nansums(groups, group_itemsize, values, n_groups, index, index_itemsize) -> "
     "[(sums, counts)] of each float64 column's values that are not NaN, per group, rows read "
     "through index (None: row i is entry i); None when a group or index is outside."},
    {"rank_values", rank_values, METH_VARARGS,
     "rank_values(samples, n, ranks) -> float64 rows x len(ranks): each row's values at the "
     "ascending int64 ranks, NaN last; -0.0 as 0.0."},
    {"bootstrap_medians", bootstrap_medians, METH_VARARGS,
     "bootstrap_medians(samples, n_steps, counts[, floors, drawn_below, drawn_through]) -> "
     "float64 medians, "
     "rows x replicates, of each row's values drawn as each replicate's counts say (None when a "
     "replicate does not draw n_steps values); each row from its floor where given."},
    {"union_length", union_length, METH_VARARGS,
     "union_length(starts, ends) -> int length of the union of runs of intervals, each run in "
     "order of start (None when one is not, or more than 64 runs)."},
    {"texts", texts, METH_VARARGS,
     "texts(data, starts, stops) -> list of str: the spans decoded as UTF-8, bad bytes "
     "replaced."},
    {"factorize", factorize, METH_VARARGS,
     "factorize(values) -> (codes, unique): int32 codes of hashable values into their "
     "distinct values, in order of first appearance."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire_native", "The XSpace decoder's hot loop in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__wire_native(void) { return PyModule_Create(&module); }
