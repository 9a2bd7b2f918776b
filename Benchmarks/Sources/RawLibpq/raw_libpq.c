#include "raw_libpq.h"
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

struct raw_pg { PGconn *conn; };

static int ok(PGresult *res, PGconn *conn) {
    ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_PIPELINE_SYNC) return 1;
    fprintf(stderr, "raw libpq: %s", res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
    return 0;
}

raw_pg *raw_pg_connect(const char *conninfo) {
    PGconn *conn = PQconnectdb(conninfo);
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "raw libpq: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return NULL;
    }
    raw_pg *pg = malloc(sizeof *pg);
    pg->conn = conn;
    return pg;
}

void raw_pg_close(raw_pg *pg) { PQfinish(pg->conn); free(pg); }

int raw_pg_exec(raw_pg *pg, const char *sql) {
    PGresult *res = PQexec(pg->conn, sql);
    int good = ok(res, pg->conn);
    PQclear(res);
    return good ? 0 : -1;
}

static uint64_t be64(uint64_t v) { return ((uint64_t)htonl((uint32_t)v) << 32) | htonl((uint32_t)(v >> 32)); }

int raw_pg_small_transactions(raw_pg *pg, const char *insert_sql, int64_t start, int64_t count, int pipelined,
                              const uint8_t *const *names, const size_t *name_lengths,
                              const int64_t *scores, const double *ratios,
                              const uint8_t *const *payloads, const size_t *payload_lengths) {
    static const Oid types[5] = {20, 25, 20, 701, 17};
    static const int formats[5] = {1, 1, 1, 1, 1};
    PGconn *conn = pg->conn;
    if (pipelined && !PQenterPipelineMode(conn)) return -1;
    for (int64_t i = 0; i < count; i++) {
        uint64_t id = be64((uint64_t)(start + i)), score = be64((uint64_t)scores[i]), ratio;
        memcpy(&ratio, &ratios[i], 8);
        ratio = be64(ratio);
        const char *values[5] = {(const char *)&id, (const char *)names[i], (const char *)&score,
                                 (const char *)&ratio, (const char *)payloads[i]};
        int lengths[5] = {8, (int)name_lengths[i], 8, 8, (int)payload_lengths[i]};
        if (!pipelined) {
            PGresult *res = PQexec(conn, "BEGIN");
            int good = ok(res, conn); PQclear(res); if (!good) return -1;
            res = PQexecParams(conn, insert_sql, 5, types, values, lengths, formats, 1);
            good = ok(res, conn); PQclear(res); if (!good) return -1;
            res = PQexec(conn, "COMMIT");
            good = ok(res, conn); PQclear(res); if (!good) return -1;
            continue;
        }
        if (!PQsendQueryParams(conn, "BEGIN", 0, NULL, NULL, NULL, NULL, 1)) return -1;
        if (!PQsendQueryParams(conn, insert_sql, 5, types, values, lengths, formats, 1)) return -1;
        if (!PQsendQueryParams(conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 1)) return -1;
        if (!PQpipelineSync(conn)) return -1;
        for (int statement = 0; statement < 3; statement++) {
            PGresult *res = PQgetResult(conn);
            int good = ok(res, conn); PQclear(res); if (!good) return -1;
            res = PQgetResult(conn); /* the NULL that ends each statement's results */
            if (res) PQclear(res);
        }
        PGresult *sync = PQgetResult(conn);
        int good = ok(sync, conn); PQclear(sync); if (!good) return -1;
    }
    if (pipelined) PQexitPipelineMode(conn);
    return 0;
}

/* Reads every value of a result as the store does (the bytes of each), returns the rows. */
static int64_t read_rows(PGresult *res) {
    int rows = PQntuples(res), columns = PQnfields(res);
    volatile uint64_t sink = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < columns; c++) {
            const char *value = PQgetvalue(res, r, c);
            int length = PQgetlength(res, r, c);
            if (length > 0) sink += (uint8_t)value[0] + (uint8_t)value[length - 1];
        }
    (void)sink;
    return rows;
}

int64_t raw_pg_point_gets(raw_pg *pg, const char *select_sql, const int64_t *keys, int64_t count) {
    static const Oid types[1] = {20};
    static const int formats[1] = {1};
    static const int lengths[1] = {8};
    if (raw_pg_exec(pg, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") != 0) return -1;
    int64_t total = 0;
    for (int64_t i = 0; i < count; i++) {
        uint64_t key = be64((uint64_t)keys[i]);
        const char *values[1] = {(const char *)&key};
        PGresult *res = PQexecParams(pg->conn, select_sql, 1, types, values, lengths, formats, 1);
        if (!ok(res, pg->conn)) { PQclear(res); return -1; }
        total += read_rows(res);
        PQclear(res);
    }
    if (raw_pg_exec(pg, "COMMIT") != 0) return -1;
    return total;
}

int64_t raw_pg_select(raw_pg *pg, const char *select_sql, int kind, int64_t first, double value, int64_t repeat) {
    Oid types[1] = {kind == 2 ? 701 : 20};
    static const int formats[1] = {1};
    static const int lengths[1] = {8};
    if (raw_pg_exec(pg, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") != 0) return -1;
    int64_t total = 0;
    for (int64_t i = 0; i < repeat; i++) {
        uint64_t bits;
        if (kind == 2) memcpy(&bits, &value, 8); else bits = (uint64_t)(first + i);
        bits = be64(bits);
        const char *values[1] = {(const char *)&bits};
        PGresult *res = PQexecParams(pg->conn, select_sql, kind ? 1 : 0, types, kind ? values : NULL,
                                     kind ? lengths : NULL, kind ? formats : NULL, 1);
        if (!ok(res, pg->conn)) { PQclear(res); return -1; }
        total += read_rows(res);
        PQclear(res);
    }
    if (raw_pg_exec(pg, "COMMIT") != 0) return -1;
    return total;
}

int raw_pg_copy(raw_pg *pg, const char *copy_sql, const uint8_t *text, size_t length) {
    PGconn *conn = pg->conn;
    if (raw_pg_exec(pg, "BEGIN") != 0) return -1;
    PGresult *res = PQexec(conn, copy_sql);
    if (PQresultStatus(res) != PGRES_COPY_IN) { ok(res, conn); PQclear(res); return -1; }
    PQclear(res);
    for (size_t offset = 0; offset < length; offset += 1 << 16) {
        size_t chunk = length - offset < (1 << 16) ? length - offset : (1 << 16);
        if (PQputCopyData(conn, (const char *)text + offset, (int)chunk) != 1) return -1;
    }
    if (PQputCopyEnd(conn, NULL) != 1) return -1;
    int good = 1;
    while ((res = PQgetResult(conn))) { good = good && ok(res, conn); PQclear(res); }
    if (!good) return -1;
    return raw_pg_exec(pg, "COMMIT");
}
