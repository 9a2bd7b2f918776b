# Sourced by the scripts that run PostgreSQL's programs for the tests: as_postgres runs a command
# as the postgres user (initdb and the servers refuse root), from root through runuser, else
# through sudo.
as_postgres() {
    if [ "$(id -un)" = postgres ]; then "$@"; elif [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@";
    else sudo -u postgres "$@"; fi
}
