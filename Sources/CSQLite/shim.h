#include <sqlite3.h>

/// Turns off double-quoted string literals for DML and DDL on `db`: with them on, a
/// double-quoted name of a column that does not exist is read as a string literal
/// (https://sqlite.org/quirks.html#dblquote). A wrapper because sqlite3_db_config is
/// variadic, which Swift cannot call.
static inline int ds_sqlite3_disable_double_quoted_strings(sqlite3 *db) {
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, (int *)0);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, (int *)0);
}
