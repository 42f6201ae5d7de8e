#include "rt_msg.h"

#include <string.h>

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

static void put_u64(msg_buf *m, uint64_t v)
{
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        put_char(m, digits[--n]);
}

static void put_i64(msg_buf *m, int64_t v)
{
    if (v < 0) {
        put_char(m, '-');
        put_u64(m, 0 - (uint64_t)v); /* also right for INT64_MIN */
    } else {
        put_u64(m, (uint64_t)v);
    }
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
        if (*fmt == 'd' && nums)
            put_i64(m, *nums++);
        else if (*fmt == 'u' && nums)
            put_u64(m, (uint64_t)*nums++);
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
