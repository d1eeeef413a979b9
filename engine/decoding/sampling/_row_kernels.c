/* One-pass kernels over a logits row, for LazyDist's exact sampling (distribution.py).
 *
 * Why C: on a GPU a target step takes a few milliseconds, and numpy needs about six passes
 * over a 152k-token row per sampled token (exp, block sums, and a comparison, a cast and a
 * dot for the top-p test), each a separate trip through memory. Here each job is one pass,
 * written as plain loops a C compiler vectorises (no intrinsics, no -ffast-math): 16
 * independent float32 lanes per sum, so the summation order is the same on every machine.
 *
 * exp is Cephes' expf (range reduction by ln 2 in two parts, a degree-6 polynomial, 2^n by
 * its bits): about 1 ulp, and the same function for every token, so the draw, the explicit
 * distribution and the top-p test all see one set of values. Inputs below -87.33654 (where
 * float32 turns subnormal) give 0; inputs over 88 overflow (LazyDist shifts any row whose top
 * is over 80).
 *
 * Module functions (buffers: C-contiguous; float32 rows, float64 block sums), and LANES:
 *   prepare(x, e, cum, block, shift)
 *   pick(e, cum, block, u, exclude) -> token
 *   tempered(e, w, top, power, block) -> total
 *   mass_above(e, threshold, before, block) -> (sum of e > threshold, count of e == threshold in e[:before])
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <stdint.h>

#if defined(_MSC_VER)
#define restrict __restrict /* MSVC before /std:c11 */
#endif

/* Every sum here runs in LANES float32 lanes (lane j takes items j, j + LANES, ...), and the
 * tail past the last full group, then the lanes, are added in double: the lane order. */
#define LANES 16

#if !defined(NO_CLONES) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
/* the row is long: glibc's loader picks the AVX-512 or AVX2 build where the CPU has it
 * (-DNO_CLONES: the baseline build only, to compare) */
#define ROW_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROW_LOOP
#endif

static inline float row_expf(float x)
{
    /* below FLT_MIN's log the result is 0; the clamp keeps -inf out of the arithmetic */
    float xc = x > -88.0f ? x : -88.0f;
    float t = xc * 1.44269504088896341f + 12582912.0f; /* round(x / ln 2) by the 1.5 * 2^23 trick */
    float n = t - 12582912.0f;
    int32_t ti;
    memcpy(&ti, &t, sizeof ti);
    int32_t ni = ti - 0x4B400000;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float r2 = r * r;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r2 + r + 1.0f;
    int32_t bits = (ni + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x >= -87.33654f ? y * scale : 0.0f;
}

/* ln(x) for a positive normal float (Cephes' logf: x = 2^k * m, m in [sqrt(1/2), sqrt(2)),
 * ln(m) by a degree-9 polynomial in m - 1): about 1 ulp; 0 and subnormals give -88 (their
 * tempered weight is 0 below), and LazyDist never passes anything else */
static inline float row_logf(float x)
{
    int32_t ix;
    memcpy(&ix, &x, sizeof ix);
    int32_t k = ((ix >> 23) & 0xff) - 127;
    int32_t mi = (ix & 0x007fffff) | 0x3f800000; /* m in [1, 2) */
    float m;
    memcpy(&m, &mi, sizeof m);
    int big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    float kf = (float)(k + big);
    float z = m - 1.0f, z2 = z * z;
    float y = 7.0376836292e-2f;
    y = y * z - 1.1514610310e-1f;
    y = y * z + 1.1676998740e-1f;
    y = y * z - 1.2420140846e-1f;
    y = y * z + 1.4249322787e-1f;
    y = y * z - 1.6668057665e-1f;
    y = y * z + 2.0000714765e-1f;
    y = y * z - 2.4999993993e-1f;
    y = y * z + 3.3333331174e-1f;
    y = y * z * z2;
    y = y + kf * -2.12194440e-4f;
    y = y - 0.5f * z2;
    float r = z + y + kf * 0.693359375f;
    return x >= 1.17549435e-38f ? r : -88.0f;
}

/* one token's value: exp(v - a) for prepare; for tempered, with a = ln top,
 * (v / top)^b = exp((ln v - a) * b), and 0 where v is 0 */
static inline float row_value(float v, int tempered, float a, float b)
{
    if (!tempered)
        return row_expf(v - a);
    return v > 0.0f ? row_expf((row_logf(v) - a) * b) : 0.0f;
}

/* out[i] = row_value(in[i]) for i < n, and their sum in the lane order: one loop, 15% faster
 * than writing the block and summing it again. Inlined into the two below with `tempered` a
 * constant, so each vectorises with its own branch folded away. */
static inline double map_and_sum(const float *restrict in, float *restrict out, Py_ssize_t n, int tempered,
                                 float a, float b)
{
    float acc[LANES] = {0};
    Py_ssize_t full = n - n % LANES;
    for (Py_ssize_t i = 0; i < full; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float v = row_value(in[i + j], tempered, a, b);
            out[i + j] = v;
            acc[j] += v;
        }
    double total = 0.0;
    for (Py_ssize_t i = full; i < n; i++) {
        float v = row_value(in[i], tempered, a, b);
        out[i] = v;
        total += v;
    }
    for (int j = 0; j < LANES; j++)
        total += acc[j];
    return total;
}

ROW_LOOP static double exp_and_sum(const float *restrict x, float *restrict e, Py_ssize_t n, float shift)
{
    return map_and_sum(x, e, n, 0, shift, 1.0f);
}

ROW_LOOP static double tempered_and_sum(const float *restrict e, float *restrict w, Py_ssize_t n, float log_top,
                                        float power)
{
    return map_and_sum(e, w, n, 1, log_top, power);
}

/* exp_and_sum or tempered_and_sum block by block (each lane adds at most block / LANES
 * values), the blocks accumulated in double; cum[b], when given, gets the running sum after
 * block b */
static double map_blocks(const float *in, float *out, Py_ssize_t n, Py_ssize_t block, double *cum, int tempered,
                         float a, float b)
{
    double run = 0.0;
    for (Py_ssize_t blk = 0, lo = 0; lo < n; blk++, lo += block) {
        Py_ssize_t len = n - lo < block ? n - lo : block;
        run += tempered ? tempered_and_sum(in + lo, out + lo, len, a, b) : exp_and_sum(in + lo, out + lo, len, a);
        if (cum != NULL)
            cum[blk] = run;
    }
    return run;
}

static void mass_above_impl(const float *restrict e, Py_ssize_t n, float t, Py_ssize_t before, Py_ssize_t block,
                            double *above, Py_ssize_t *ties)
{
    /* block by block in the lane order, as prepare sums: each lane adds at most block / LANES
     * float32 values, so the sum is within (block / LANES) * 2^-24 of the row's total */
    double total = 0.0;
    for (Py_ssize_t lo = 0; lo < n; lo += block) {
        const float *v = e + lo;
        Py_ssize_t len = n - lo < block ? n - lo : block, full = len - len % LANES;
        float acc[LANES] = {0};
        for (Py_ssize_t i = 0; i < full; i += LANES)
            for (int j = 0; j < LANES; j++)
                acc[j] += v[i + j] > t ? v[i + j] : 0.0f;
        for (Py_ssize_t i = full; i < len; i++)
            total += v[i] > t ? v[i] : 0.0f;
        for (int j = 0; j < LANES; j++)
            total += acc[j];
    }
    Py_ssize_t c = 0;
    for (Py_ssize_t i = 0; i < before; i++)
        c += e[i] == t;
    *above = total;
    *ties = c;
}

static int get_row(PyObject *obj, Py_buffer *view, int writable, char kind, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0)
        return -1;
    Py_ssize_t size = kind == 'f' ? 4 : 8;
    const char *fmt = view->format ? view->format : "B";
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@')
        fmt++;
    if (view->ndim != 1 || view->itemsize != size || fmt[0] != kind || fmt[1] != '\0') {
        PyErr_Format(PyExc_TypeError, "%s must be a 1-D contiguous %s array", name,
                     kind == 'f' ? "float32" : "float64");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

struct row_spec {
    int writable;
    char kind; /* 'f': float32, 'd': float64 */
    const char *name;
};

/* all of them or none: on a failure the buffers already taken are released */
static int take_rows(PyObject *const *objs, Py_buffer *views, const struct row_spec *specs, int count)
{
    for (int i = 0; i < count; i++) {
        if (get_row(objs[i], &views[i], specs[i].writable, specs[i].kind, specs[i].name) != 0) {
            while (i-- > 0)
                PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    return 0;
}

static void release_rows(Py_buffer *views, int count)
{
    for (int i = 0; i < count; i++)
        PyBuffer_Release(&views[i]);
}

/* the argument count a function takes, else a TypeError with its signature */
static int arity(Py_ssize_t nargs, Py_ssize_t want, const char *signature)
{
    if (nargs == want)
        return 0;
    PyErr_SetString(PyExc_TypeError, signature);
    return -1;
}

/* a block size argument: positive, else a ValueError */
static int block_arg(PyObject *obj, Py_ssize_t *block)
{
    *block = PyLong_AsSsize_t(obj);
    if (*block == -1 && PyErr_Occurred())
        return -1;
    if (*block <= 0) {
        PyErr_SetString(PyExc_ValueError, "block must be positive");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(prepare_doc,
"prepare(x, e, cum, block, shift)\n\n"
"Writes e = exp(x - shift) and cum[b] = the sum of e over tokens [0, (b+1)*block), block by\n"
"block (each block's lane sum, accumulated in double; len(cum) == ceil(len(x) / block)).");

static PyObject *prepare(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const struct row_spec specs[3] = {{0, 'f', "x"}, {1, 'f', "e"}, {1, 'd', "cum"}};
    (void)self;
    if (arity(nargs, 5, "prepare(x, e, cum, block, shift)") != 0)
        return NULL;
    Py_ssize_t block;
    double shift = PyFloat_AsDouble(args[4]);
    Py_buffer v[3];
    if ((shift == -1.0 && PyErr_Occurred()) || block_arg(args[3], &block) != 0 || take_rows(args, v, specs, 3) != 0)
        return NULL;
    Py_ssize_t n = v[0].shape[0];
    int ok = v[1].shape[0] == n && v[2].shape[0] == (n + block - 1) / block;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        map_blocks(v[0].buf, v[1].buf, n, block, v[2].buf, 0, (float)shift, 1.0f);
        Py_END_ALLOW_THREADS
    }
    release_rows(v, 3);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "need e as long as x and ceil(len(x) / block) block sums");
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(mass_above_doc,
"mass_above(e, threshold, before, block) -> (above, ties)\n\n"
"above: the sum of e's values greater than threshold (by blocks of `block` tokens in float32\n"
"lanes, as prepare sums, accumulated in double); ties: how many of e[:before] equal threshold.");

static PyObject *mass_above(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const struct row_spec specs[1] = {{0, 'f', "e"}};
    (void)self;
    if (arity(nargs, 4, "mass_above(e, threshold, before, block)") != 0)
        return NULL;
    double t = PyFloat_AsDouble(args[1]);
    Py_ssize_t before = PyLong_AsSsize_t(args[2]), block;
    Py_buffer v[1];
    if (PyErr_Occurred() || block_arg(args[3], &block) != 0 || take_rows(args, v, specs, 1) != 0)
        return NULL;
    Py_ssize_t n = v[0].shape[0];
    before = before < 0 ? 0 : (before > n ? n : before);
    double above;
    Py_ssize_t ties;
    Py_BEGIN_ALLOW_THREADS
    mass_above_impl(v[0].buf, n, (float)t, before, block, &above, &ties);
    Py_END_ALLOW_THREADS
    release_rows(v, 1);
    return Py_BuildValue("(dn)", above, ties);
}

PyDoc_STRVAR(pick_doc,
"pick(e, cum, block, u, exclude) -> token\n\n"
"The token at mass u of the proposal: the first block b with cum[b] > u, then in it the first\n"
"token whose running float64 sum (in id order, e[exclude] counted as 0) passes\n"
"(u - cum[b-1]) scaled from the block's mass in cum to that running sum's total: numpy's\n"
"searchsorted(side='right') over cumsum, twice. exclude: -1 for none.");

static Py_ssize_t pick_impl(const float *e, Py_ssize_t n, const double *cum, Py_ssize_t nb, Py_ssize_t block,
                            double u, Py_ssize_t exclude)
{
    Py_ssize_t blk = 0;
    while (blk < nb - 1 && cum[blk] <= u)
        blk++;
    double lo = blk ? cum[blk - 1] : 0.0, mass = cum[blk] - lo;
    Py_ssize_t start = blk * block, len = start + block <= n ? block : n - start;
    double total = 0.0;
    for (Py_ssize_t i = 0; i < len; i++)
        total += start + i == exclude ? 0.0 : (double)e[start + i];
    double r = mass > 0.0 ? (u - lo) * (total / mass) : 0.0, run = 0.0;
    Py_ssize_t j = 0;
    for (; j < len - 1; j++) {
        run += start + j == exclude ? 0.0 : (double)e[start + j];
        if (run > r)
            break;
    }
    return start + j;
}

static PyObject *pick(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const struct row_spec specs[2] = {{0, 'f', "e"}, {0, 'd', "cum"}};
    (void)self;
    if (arity(nargs, 5, "pick(e, cum, block, u, exclude)") != 0)
        return NULL;
    double u = PyFloat_AsDouble(args[3]);
    Py_ssize_t exclude = PyLong_AsSsize_t(args[4]), block;
    Py_buffer v[2];
    if (PyErr_Occurred() || block_arg(args[2], &block) != 0 || take_rows(args, v, specs, 2) != 0)
        return NULL;
    Py_ssize_t n = v[0].shape[0], nb = v[1].shape[0], tok = -1;
    if (n > 0 && nb == (n + block - 1) / block)
        tok = pick_impl(v[0].buf, n, v[1].buf, nb, block, u, exclude);
    release_rows(v, 2);
    if (tok < 0) {
        PyErr_SetString(PyExc_ValueError, "need a non-empty e and ceil(len(e) / block) block sums");
        return NULL;
    }
    return PyLong_FromSsize_t(tok);
}

PyDoc_STRVAR(tempered_doc,
"tempered(e, w, top, power, block) -> total\n\n"
"Writes w = (e / top)^power (0 where e is 0), computed as exp((ln e - ln top) * power), and\n"
"returns its sum (by blocks of `block` tokens in float32 lanes, as prepare sums, accumulated\n"
"in double).");

static PyObject *tempered(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const struct row_spec specs[2] = {{0, 'f', "e"}, {1, 'f', "w"}};
    (void)self;
    if (arity(nargs, 5, "tempered(e, w, top, power, block)") != 0)
        return NULL;
    double top = PyFloat_AsDouble(args[2]), power = PyFloat_AsDouble(args[3]);
    Py_ssize_t block;
    Py_buffer v[2];
    if (PyErr_Occurred() || block_arg(args[4], &block) != 0 || take_rows(args, v, specs, 2) != 0)
        return NULL;
    Py_ssize_t n = v[0].shape[0];
    int ok = v[1].shape[0] == n && top > 0.0;
    double total = 0.0;
    if (ok) {
        float log_top = row_logf((float)top);
        Py_BEGIN_ALLOW_THREADS
        total = map_blocks(v[0].buf, v[1].buf, n, block, NULL, 1, log_top, (float)power);
        Py_END_ALLOW_THREADS
    }
    release_rows(v, 2);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "need w as long as e and a positive top");
        return NULL;
    }
    return PyFloat_FromDouble(total);
}

static PyMethodDef methods[] = {
    {"prepare", (PyCFunction)(void (*)(void))prepare, METH_FASTCALL, prepare_doc},
    {"mass_above", (PyCFunction)(void (*)(void))mass_above, METH_FASTCALL, mass_above_doc},
    {"pick", (PyCFunction)(void (*)(void))pick, METH_FASTCALL, pick_doc},
    {"tempered", (PyCFunction)(void (*)(void))tempered, METH_FASTCALL, tempered_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_row_kernels",
    "One-pass kernels over a logits row for distribution.py's LazyDist (exp with block sums, the proposal's pick, "
    "the top-p mass test, the tempered weights).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__row_kernels(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "LANES", LANES) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
