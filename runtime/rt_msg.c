#include "rt_msg.h"

#include <string.h>

#include "rt_div64.h"

typedef struct {
    char *buf;
    size_t cap; /* bytes including the terminating NUL */
    size_t len;
} msg_buf;

static void put_char(msg_buf *m, char c)
{
    if (m->len + 1 < m->cap)
        m->buf[m->len++] = c;
}

static void put_str(msg_buf *m, const char *s)
{
    if (!s)
        s = "(null)";
    while (*s)
        put_char(m, *s++);
}

const char *rt_dec_text(int64_t v, bool is_unsigned, char buf[RT_DEC_BYTES])
{
    bool minus = !is_unsigned && v < 0;
    uint64_t u = minus ? 0 - (uint64_t)v : (uint64_t)v; /* also right for INT64_MIN */
    char *p = buf + RT_DEC_BYTES - 1;
    *p = '\0';
    do {
        uint64_t q = rt_udiv64(u, 10);
        *--p = (char)('0' + (u - q * 10));
        u = q;
    } while (u);
    if (minus)
        *--p = '-';
    return p;
}

static void format(msg_buf *m, const char *fmt, const int64_t *nums,
                   const char *const *strs)
{
    for (; *fmt; fmt++) {
        if (fmt[0] != '%' || !fmt[1]) {
            put_char(m, *fmt);
            continue;
        }
        fmt++;
        char text[RT_DEC_BYTES];
        if ((*fmt == 'd' || *fmt == 'u') && nums)
            put_str(m, rt_dec_text(*nums++, *fmt == 'u', text));
        else if (*fmt == 's' && strs)
            put_str(m, *strs++);
        else
            put_char(m, *fmt);
    }
    m->buf[m->len] = '\0';
}

llmc_rt_status rt_fail(llmc_rt_error *err, llmc_rt_status code, const char *fmt,
                       const int64_t *nums, const char *const *strs)
{
    if (err) {
        msg_buf m = {err->msg, sizeof err->msg, 0};
        err->code = code;
        format(&m, fmt, nums, strs);
    }
    return code;
}

llmc_rt_status rt_prefix(llmc_rt_error *err, llmc_rt_status code, const char *fmt,
                         const int64_t *nums, const char *const *strs)
{
    if (err) {
        char old[sizeof err->msg];
        msg_buf m = {err->msg, sizeof err->msg, 0};
        memcpy(old, err->msg, sizeof old);
        old[sizeof old - 1] = '\0';
        err->code = code;
        format(&m, fmt, nums, strs);
        put_str(&m, old);
        m.buf[m.len] = '\0';
    }
    return code;
}

const char *llmc_rt_status_text(llmc_rt_status status)
{
    static const char *const texts[] = {
#define LLMC_RT_TEXT_(code, text) text,
        LLMC_RT_STATUS_LIST(LLMC_RT_TEXT_)
#undef LLMC_RT_TEXT_
    };
    if ((unsigned)status >= LLMC_RT_STATUS_COUNT)
        return "unknown status";
    return texts[status];
}
