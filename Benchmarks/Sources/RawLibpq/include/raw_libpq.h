#ifndef RAW_LIBPQ_H
#define RAW_LIBPQ_H
#include <stdint.h>
#include <stddef.h>

/* The benchmark's raw side for PostgreSQL: libpq called from C, the same statements, table and
   index as PostgresStore, binary parameters and results. Each function returns -1 on an error
   (printed to standard error). */
typedef struct raw_pg raw_pg;

raw_pg *raw_pg_connect(const char *conninfo);
void raw_pg_close(raw_pg *pg);
/* Runs one statement without parameters and waits for it. */
int raw_pg_exec(raw_pg *pg, const char *sql);
/* `count` transactions of one INSERT each (rows start...): BEGIN; INSERT; COMMIT, each waited
   for (three round trips), or all three in one pipeline (one round trip) when `pipelined`. */
int raw_pg_small_transactions(raw_pg *pg, const char *insert_sql, int64_t start, int64_t count, int pipelined,
                              const uint8_t *const *names, const size_t *name_lengths,
                              const int64_t *scores, const double *ratios,
                              const uint8_t *const *payloads, const size_t *payload_lengths);
/* One SELECT of one row by key per key, in one REPEATABLE READ READ ONLY transaction; returns
   the rows read (each value read from the result). */
int64_t raw_pg_point_gets(raw_pg *pg, const char *select_sql, const int64_t *keys, int64_t count);
/* One SELECT with at most one bigint or float8 parameter (`kind` 0: none, 1: bigint, 2: float8),
   rows read; `repeat` times with parameter values first, first+1, … (bigint), in one snapshot. */
int64_t raw_pg_select(raw_pg *pg, const char *select_sql, int kind, int64_t first, double value, int64_t repeat);
/* BEGIN; COPY … FROM STDIN with `length` bytes of COPY text; COMMIT. */
int raw_pg_copy(raw_pg *pg, const char *copy_sql, const uint8_t *text, size_t length);
#endif
